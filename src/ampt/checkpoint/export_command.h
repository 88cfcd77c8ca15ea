// `ampt export`: a checkpoint's weights as a file the rest of the ecosystem reads.
#pragma once

#include <string>
#include <vector>

namespace ampt::checkpoint {

// `args` are the arguments after `export`: --checkpoint PATH --out FILE [--format safetensors]
// [--dtype fp32|bf16]. Throws UsageError for bad arguments, RuntimeError for a bad checkpoint.
// Returns the lines to print.
std::string run_export(const std::vector<std::string>& args);

std::string export_help();

}  // namespace ampt::checkpoint
