// --fp8_layers: which of a model's Linear layers run in fp8 (precision/fp8_layers.h decides).
#pragma once

#include <string>
#include <string_view>

namespace ampt::config {

inline constexpr std::string_view kFp8LayersExpected =
    "auto, all, or comma-separated layer-name patterns of letters, digits, '_', '.', '*' and '?' "
    "(e.g. h.*.mlp.*,head)";

// Why `text` is not a valid fp8_layers value; empty when it is.
std::string fp8_layers_problem(std::string_view text);

}  // namespace ampt::config
