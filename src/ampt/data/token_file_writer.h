// Writes llm.c token shards, the layout open_token_file (token_file.h) reads: a 256-int32 header
// (magic 20240520, version 1, token count) and uint16 tokens. A shard appears whole or not at
// all: it is written to a temporary file beside the target and renamed over it on commit().
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

namespace ampt::data {

class TokenFileWriter {
 public:
  // Throws RuntimeError naming the file when the temporary file cannot be created.
  explicit TokenFileWriter(std::string path);
  ~TokenFileWriter();  // uncommitted: removes the temporary file
  TokenFileWriter(const TokenFileWriter&) = delete;
  TokenFileWriter& operator=(const TokenFileWriter&) = delete;

  // Ids must be below 65536 (the caller checks its vocabulary once). Throws RuntimeError when the
  // write fails or the shard would pass llm.c's int32 token count.
  void append(std::span<const int32_t> ids);
  // Writes the count into the header, flushes and renames; throws RuntimeError naming the file.
  void commit();
  int64_t tokens() const { return tokens_; }
  const std::string& path() const { return path_; }

 private:
  void fail(const std::string& what);

  std::string path_;
  std::string temporary_;
  std::FILE* file_ = nullptr;
  int64_t tokens_ = 0;
};

}  // namespace ampt::data
