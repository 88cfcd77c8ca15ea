// Token shards on disk: llm.c's .bin (a 256-int32 header, then uint16 tokens, or uint32 for
// vocabularies beyond 65536 ids such as Llama 3's) and nanoGPT's headerless uint16
// train.bin/val.bin, told apart per file by the llm.c magic number.
#pragma once

#include "ampt/data/token_windows.h"

#include <cstdint>
#include <string>

namespace ampt::data {

inline constexpr int64_t kLlmcHeaderInts = 256;

// llm.c's dev/data/data_common.py: header[0] the magic, header[1] the version, header[2] the
// token count, then the tokens.
struct LlmcLayout {
  int32_t magic;
  int32_t version;
  int bytes_per_token;
  const char* what;  // for errors
};
inline constexpr LlmcLayout kLlmcUint16{20240520, 1, 2, "GPT-2 uint16 tokens"};
inline constexpr LlmcLayout kLlmcUint32{20240801, 7, 4, "Llama-3 uint32 tokens"};

// The layout llm.c writes for ids below `vocab_size`: uint16 when they fit, else uint32.
constexpr const LlmcLayout& llmc_layout(int64_t vocab_size) {
  return vocab_size <= 65536 ? kLlmcUint16 : kLlmcUint32;
}

// ampt's loss mask beside a shard of instruction data (loss_mask.h): the same header, one byte
// per token.
inline constexpr LlmcLayout kLossMask{20261124, 1, 1, "ampt loss mask bytes"};

enum class TokenFileFormat { llmc, nanogpt };

struct TokenFile {
  TokenSpan span;  // the tokens (uint16 or uint32), mapped in place
  TokenFileFormat format = TokenFileFormat::nanogpt;
};

// Maps `path` and checks its layout; throws RuntimeError naming the file when it is missing,
// empty, an llm.c file with a date-like magic other than 20240520 (uint16) and 20240801
// (uint32) or another version than its magic's (1 and 7), holds fewer tokens than its header
// says, or (headerless) has an odd number of bytes.
TokenFile open_token_file(const std::string& path);

// Maps a file of llm.c's header layout whose magic must be layout.magic (the loss mask's); throws
// RuntimeError naming the file as open_token_file does.
TokenSpan open_llmc_file(const std::string& path, const LlmcLayout& layout);

}  // namespace ampt::data
