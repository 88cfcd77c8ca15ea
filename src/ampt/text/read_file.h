// A whole file as bytes, for the tokenizer's files and the texts it encodes.
#pragma once

#include <string>

namespace ampt::text {

// Throws RuntimeError "PATH: cannot open: REASON" or "PATH: file is empty".
std::string read_whole_file(const std::string& path);

}  // namespace ampt::text
