#include "ampt/core/errors.h"
#include "ampt/data/document_examples.h"
#include "ampt/data/text_file.h"
#include "ampt/data/text_shard.h"
#include "ampt/data/token_file.h"
#include "ampt/data/token_windows.h"
#include "data/data_fixtures.h"
#include "support/process.h"

#include <catch2/catch.hpp>

#include <numeric>

using namespace ampt::data;
using ampt::RuntimeError;
using ampt::test::llmc_shard;
using ampt::test::llmc_uint32_shard;
using ampt::test::make_temp_dir;
using ampt::test::uint16_tokens;
using ampt::test::write_file;

namespace {

std::vector<uint16_t> counting(int n, uint16_t first = 0) {
  std::vector<uint16_t> tokens(static_cast<size_t>(n));
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

std::vector<int64_t> values(const torch::Tensor& t) { return ampt::test::as_vector(t); }

}  // namespace

TEST_CASE("token files: llm.c and headerless nanoGPT shards read back exactly", "[data][tokens]") {
  const auto dir = make_temp_dir();
  const std::vector<uint16_t> tokens{7, 65535, 0, 50256, 3};
  write_file(dir + "/a.bin", llmc_shard(tokens));
  write_file(dir + "/b.bin", uint16_tokens(tokens));
  for (const auto& [name, format] : {std::pair{"/a.bin", TokenFileFormat::llmc},
                                     std::pair{"/b.bin", TokenFileFormat::nanogpt}}) {
    INFO(name);
    const auto file = open_token_file(dir + name);
    CHECK(file.format == format);
    REQUIRE(file.span.count == 5);
    const auto* read = static_cast<const uint16_t*>(file.span.data);
    CHECK(std::vector<uint16_t>(read, read + 5) == tokens);
    CHECK(max_token(file.span) == 65535);
  }
}

TEST_CASE("token files: llm.c's uint32 (Llama-3) shards give windows and documents of any id",
          "[data][tokens]") {
  const auto dir = make_temp_dir();
  constexpr uint32_t kSep = 151643;  // Qwen2's <|endoftext|>
  const std::vector<uint32_t> tokens{kSep, 65535, 65536, 128255, kSep, 7, kSep, 151935, 0, 70000};
  write_file(dir + "/a.bin", llmc_uint32_shard(tokens));
  const auto file = open_token_file(dir + "/a.bin");
  CHECK(file.format == TokenFileFormat::llmc);
  CHECK(file.span.bytes_per_token == 4);
  REQUIRE(file.span.count == 10);
  const auto* read = static_cast<const uint32_t*>(file.span.data);
  CHECK(std::vector<uint32_t>(read, read + 10) == tokens);
  CHECK(max_token(file.span) == 151935);
  CHECK(count_token(file.span, kSep) == 3);

  // Windows of int64 ids, as from uint16 shards.
  const TokenWindows windows({file.span}, 3, 151936);
  REQUIRE(windows.size() == 3);
  const auto batch = windows.gather({2, 0});
  CHECK(batch.inputs.scalar_type() == torch::kInt64);
  CHECK(values(batch.inputs) == std::vector<int64_t>{kSep, 151935, 0, kSep, 65535, 65536});
  CHECK(values(batch.targets) == std::vector<int64_t>{151935, 0, 70000, 65535, 65536, 128255});
  CHECK_THROWS_WITH(TokenWindows({file.span}, 3, 151935),
                    dir + "/a.bin: token id 151935 >= vocab_size 151935; set --vocab_size to at "
                          "least 151936");

  // Documents: the runs after each separator, one example each ending with the separator.
  const auto documents = split_at(file.span, 0, kSep);
  REQUIRE(documents.size() == 3);
  CHECK(documents[0].begin == 1);
  CHECK(documents[0].length == 3);
  CHECK(documents[2].length == 3);
  const DocumentExamples examples({file.span}, documents, 4, kSep, kSep, 151936);
  REQUIRE(examples.size() == 3);
  const auto padded = examples.gather({0, 1, 2});
  const int64_t x = kIgnoredTarget;
  CHECK(values(padded.inputs) == std::vector<int64_t>{65535, 65536, 128255, kSep, /**/ 7, kSep, kSep,
                                                      kSep, /**/ 151935, 0, 70000, kSep});
  CHECK(values(padded.targets) == std::vector<int64_t>{65536, 128255, kSep, x, /**/ kSep, x, x, x,
                                                       /**/ 0, 70000, kSep, x});
}

TEST_CASE("token windows: inputs are block_size tokens, targets the same shifted by one",
          "[data][tokens]") {
  const auto dir = make_temp_dir();
  write_file(dir + "/a.bin", llmc_shard(counting(10)));         // windows [0..4], [4..8]
  write_file(dir + "/b.bin", uint16_tokens(counting(6, 100)));  // window [100..104]; 105 left over
  std::vector<TokenSpan> spans{open_token_file(dir + "/a.bin").span,
                               open_token_file(dir + "/b.bin").span};
  const TokenWindows windows(std::move(spans), 4, 1000);
  REQUIRE(windows.size() == 3);
  CHECK(windows.tokens() == 16);
  const auto batch = windows.gather({2, 0, 1});
  CHECK(batch.inputs.sizes() == torch::IntArrayRef({3, 4}));
  CHECK(batch.inputs.scalar_type() == torch::kInt64);
  CHECK(values(batch.inputs) == std::vector<int64_t>{100, 101, 102, 103, 0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(values(batch.targets) == std::vector<int64_t>{101, 102, 103, 104, 1, 2, 3, 4, 5, 6, 7, 8});
}

TEST_CASE("text files: every byte is a token", "[data][text]") {
  const auto dir = make_temp_dir();
  write_file(dir + "/t.txt", std::string("hello, world\xff", 13));
  const TokenWindows windows({open_text_file(dir + "/t.txt")}, 3, 256);
  REQUIRE(windows.size() == 4);  // (13 - 1) / 3
  const auto batch = windows.gather({1, 3});
  CHECK(values(batch.inputs) == std::vector<int64_t>{'l', 'o', ',', 'r', 'l', 'd'});
  CHECK(values(batch.targets) == std::vector<int64_t>{'o', ',', ' ', 'l', 'd', 255});
  CHECK(max_token(open_text_file(dir + "/t.txt")) == 255);
}

TEST_CASE("token files: bad data is a one-line error naming the file", "[data][tokens][errors]") {
  const auto dir = make_temp_dir();
  auto error_of = [&](const std::string& name, const std::string& bytes) {
    write_file(dir + "/" + name, bytes);
    try {
      open_token_file(dir + "/" + name);
    } catch (const RuntimeError& e) {
      const std::string message = e.what();
      CHECK(message.find('\n') == std::string::npos);
      CHECK(message.starts_with(dir + "/" + name + ": "));
      return message;
    }
    FAIL("no error for " << name);
    return std::string();
  };
  CHECK_THAT(error_of("empty.bin", ""), Catch::Contains("file is empty"));
  CHECK_THAT(error_of("magic.bin", llmc_shard(counting(8), 20240901)),
             Catch::EndsWith("llm.c magic 20240901 is not 20240520 (GPT-2 uint16 tokens) or "
                             "20240801 (Llama-3 uint32 tokens)"));
  CHECK_THAT(error_of("version.bin", llmc_shard(counting(8), 20240520, 2)),
             Catch::EndsWith("llm.c version 2 is not supported (expected 1 with magic 20240520)"));
  // Each magic has its own version: llm.c's Llama-3 shards are version 7.
  CHECK_THAT(error_of("version7.bin", llmc_shard(counting(8), 20240520, 7)),
             Catch::EndsWith("llm.c version 7 is not supported (expected 1 with magic 20240520)"));
  CHECK_THAT(error_of("version1.bin", llmc_uint32_shard({1, 2, 3}, 20240801, 1)),
             Catch::EndsWith("llm.c version 1 is not supported (expected 7 with magic 20240801)"));
  CHECK_THAT(error_of("truncated.bin", llmc_shard(counting(8), 20240520, 1, 9)),
             Catch::Contains("truncated: the header says 9 tokens but the file holds 8"));
  // uint32 tokens: 4 bytes each, so 8 uint16s' bytes hold 4.
  CHECK_THAT(error_of("truncated32.bin", llmc_shard(counting(8), 20240801, 7)),
             Catch::EndsWith("truncated: the header says 8 tokens but the file holds 4"));
  CHECK_THAT(error_of("short.bin", llmc_shard({}).substr(0, 100)),
             Catch::Contains("100 bytes, shorter than the 1024-byte llm.c header"));
  CHECK_THAT(error_of("odd.bin", uint16_tokens(counting(8)) + "x"),
             Catch::Contains("odd byte length 17"));
  CHECK_THROWS_WITH(open_token_file(dir + "/missing.bin"),
                    Catch::Contains(dir + "/missing.bin: cannot open: No such file"));
}

TEST_CASE("token windows: ids beyond the vocabulary and too little data are errors",
          "[data][tokens][errors]") {
  const auto dir = make_temp_dir();
  write_file(dir + "/big.bin", llmc_shard({1, 2, 50256, 3}));
  CHECK_THROWS_WITH(TokenWindows({open_token_file(dir + "/big.bin").span}, 2, 50000),
                    Catch::Equals(dir + "/big.bin: token id 50256 >= vocab_size 50000; set "
                                        "--vocab_size to at least 50257"));
  write_file(dir + "/short.bin", uint16_tokens(counting(4)));
  CHECK_THROWS_WITH(TokenWindows({open_token_file(dir + "/short.bin").span}, 4, 256),
                    Catch::Contains(dir + "/short.bin: no file holds one window of block_size + "
                                          "1 = 5 tokens (4 tokens in all)"));
}

TEST_CASE("token windows: the vocabulary check covers long shards", "[data][tokens]") {
  const auto dir = make_temp_dir();
  auto tokens = counting(100'003);  // crosses the vectorised blocks and leaves a remainder
  for (auto& t : tokens) t %= 1000;
  tokens[99'999] = 4242;
  write_file(dir + "/long.bin", uint16_tokens(tokens));
  CHECK(max_token(open_token_file(dir + "/long.bin").span) == 4242);
}
