// Byte-level language modelling on any file: each byte is one token (ids 0..255).
#pragma once

#include "ampt/data/token_windows.h"

#include <string>

namespace ampt::data {

// The file's bytes, mapped in place; throws RuntimeError naming a missing or empty file.
TokenSpan open_text_file(const std::string& path);

}  // namespace ampt::data
