// Writes llm.c token shards, the layout open_token_file (token_file.h) reads: a 256-int32 header
// (magic, version, token count), then the tokens: uint16 (magic 20240520, version 1) when the
// vocabulary fits 65536 ids, else uint32 (magic 20240801, version 7), as llm.c's
// dev/data/data_common.py writes GPT-2 and Llama 3 shards. A shard appears whole or not at all:
// it is written to a temporary file beside the target and renamed over it on commit().
#pragma once

#include "ampt/data/token_file.h"

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

namespace ampt::data {

class TokenFileWriter {
 public:
  // The ids appended will be below `vocab_size`, which chooses the layout (llmc_layout).
  // Throws RuntimeError naming the file when the temporary file cannot be created.
  TokenFileWriter(std::string path, int64_t vocab_size);
  // A file of `layout`'s header and values (kLossMask: one byte per token).
  TokenFileWriter(std::string path, const LlmcLayout& layout);
  ~TokenFileWriter();  // uncommitted: removes the temporary file
  TokenFileWriter(const TokenFileWriter&) = delete;
  TokenFileWriter& operator=(const TokenFileWriter&) = delete;

  // Ids must be in [0, vocab_size) (the caller checks its vocabulary once). Throws RuntimeError
  // when the write fails or the shard would pass llm.c's int32 token count.
  void append(std::span<const int32_t> ids);
  // Bytes, for a one-byte layout (a loss mask).
  void append(std::span<const uint8_t> bytes);
  // Writes the count into the header, flushes and renames; throws RuntimeError naming the file.
  void commit();
  int64_t tokens() const { return tokens_; }
  int bytes_per_token() const { return layout_.bytes_per_token; }
  const std::string& path() const { return path_; }

 private:
  void fail(const std::string& what);
  void count(std::size_t values);

  std::string path_;
  std::string temporary_;
  LlmcLayout layout_;
  std::FILE* file_ = nullptr;
  int64_t tokens_ = 0;
};

}  // namespace ampt::data
