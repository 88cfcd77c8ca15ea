// Token shards on disk: llm.c's .bin (a 256-int32 header, then uint16 tokens) and nanoGPT's
// headerless uint16 train.bin/val.bin, told apart per file by the llm.c magic number.
#pragma once

#include "ampt/data/token_windows.h"

#include <cstdint>
#include <string>

namespace ampt::data {

inline constexpr int32_t kLlmcMagic = 20240520;
inline constexpr int32_t kLlmcVersion = 1;
inline constexpr int64_t kLlmcHeaderInts = 256;

enum class TokenFileFormat { llmc, nanogpt };

struct TokenFile {
  TokenSpan span;  // the uint16 tokens, mapped in place
  TokenFileFormat format = TokenFileFormat::nanogpt;
};

// Maps `path` and checks its layout; throws RuntimeError naming the file when it is missing,
// empty, an llm.c file with another version or a date-like magic other than 20240520, holds
// fewer tokens than its header says, or (headerless) has an odd number of bytes.
TokenFile open_token_file(const std::string& path);

}  // namespace ampt::data
