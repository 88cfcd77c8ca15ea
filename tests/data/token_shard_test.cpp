// Writing llm.c shards (read back by the reader and checked byte by byte against the layout),
// one example per document, and the batch and validation sizes of small splits.
#include "ampt/core/errors.h"
#include "ampt/data/document_examples.h"
#include "ampt/data/registry.h"
#include "ampt/data/token_file.h"
#include "ampt/data/token_file_writer.h"
#include "data/data_fixtures.h"
#include "support/process.h"

#include <catch2/catch.hpp>

#include <filesystem>

using namespace ampt::data;
using ampt::test::as_vector;
using ampt::test::llmc_shard;
using ampt::test::llmc_uint32_shard;
using ampt::test::make_temp_dir;

namespace {

// A span over tokens held in memory.
TokenSpan span_of(std::vector<uint16_t> tokens, const std::string& name = "mem") {
  auto owned = std::make_shared<std::vector<uint16_t>>(std::move(tokens));
  const void* data = owned->data();
  const auto count = static_cast<int64_t>(owned->size());
  return {.name = name, .owner = std::move(owned), .data = data, .count = count, .bytes_per_token = 2};
}

}  // namespace

TEST_CASE("token file writer: llm.c's layout, whole or not at all", "[data][tokens][writer]") {
  const auto dir = make_temp_dir();
  const std::vector<int32_t> first{50256, 7, 65535}, second{0, 3};
  {
    TokenFileWriter writer(dir + "/a.bin", 65536);
    CHECK(writer.bytes_per_token() == 2);
    writer.append(first);
    writer.append(second);
    CHECK(writer.tokens() == 5);
    // Not there until committed: a reader never sees half a shard.
    CHECK_FALSE(std::filesystem::exists(dir + "/a.bin"));
    writer.commit();
  }
  CHECK(ampt::test::read_file(dir + "/a.bin") == llmc_shard({50256, 7, 65535, 0, 3}));
  const auto file = open_token_file(dir + "/a.bin");
  CHECK(file.format == TokenFileFormat::llmc);
  CHECK(file.span.count == 5);
  {
    TokenFileWriter abandoned(dir + "/b.bin", 50257);
    abandoned.append(first);
  }
  CHECK_FALSE(std::filesystem::exists(dir + "/b.bin"));
  CHECK(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()) == 1);
  CHECK_THROWS_WITH(TokenFileWriter(dir + "/no/such/dir/c.bin", 50257),
                    Catch::StartsWith(dir + "/no/such/dir/c.bin.tmp-") &&
                        Catch::EndsWith(": cannot create: No such file or directory"));
}

TEST_CASE("token file writer: a vocabulary beyond 65536 ids writes llm.c's uint32 layout",
          "[data][tokens][writer]") {
  const auto dir = make_temp_dir();
  const std::vector<int32_t> ids{151643, 7, 65535, 65536, 0, 151935};
  {
    TokenFileWriter writer(dir + "/a.bin", 65537);
    CHECK(writer.bytes_per_token() == 4);
    writer.append(std::span(ids).first(2));
    writer.append(std::span(ids).subspan(2));
    writer.commit();
  }
  // Magic 20240801, version 7, as llm.c's dev/data/data_common.py writes Llama 3's tokens.
  CHECK(ampt::test::read_file(dir + "/a.bin") ==
        llmc_uint32_shard({151643, 7, 65535, 65536, 0, 151935}));
  const auto file = open_token_file(dir + "/a.bin");
  CHECK(file.format == TokenFileFormat::llmc);
  CHECK(file.span.bytes_per_token == 4);
  CHECK(file.span.count == 6);
  CHECK(max_token(file.span) == 151935);
  CHECK(&llmc_layout(65536) == &kLlmcUint16);
  CHECK(&llmc_layout(65537) == &kLlmcUint32);
}

TEST_CASE("document examples: split at the separator, truncated, padded, padding unscored",
          "[data][documents]") {
  constexpr uint16_t kSep = 9;
  // Documents {1 2 3}, {}, {4}, {5 6 7 8 1 2}, as write_text_shard lays them out.
  const auto span = span_of({kSep, 1, 2, 3, kSep, kSep, 4, kSep, 5, 6, 7, 8, 1, 2});
  const auto documents = split_at(span, 0, kSep);
  REQUIRE(documents.size() == 4);
  CHECK(documents[0].begin == 1);
  CHECK(documents[0].length == 3);
  CHECK(documents[1].length == 0);
  CHECK(documents[3].begin == 8);
  CHECK(documents[3].length == 6);

  const DocumentExamples examples({span}, documents, /*length=*/4, kSep, /*pad=*/kSep, 10);
  CHECK(examples.counts().documents == 4);
  CHECK(examples.counts().dropped == 1);    // the empty one: its separator alone
  CHECK(examples.counts().truncated == 1);  // 6 tokens + separator > 5
  REQUIRE(examples.size() == 3);
  const auto batch = examples.gather({0, 1, 2});
  const int64_t x = kIgnoredTarget;
  CHECK(as_vector(batch.inputs) == std::vector<int64_t>{1, 2, 3, kSep, /**/ 4, kSep, kSep, kSep,
                                                        /**/ 5, 6, 7, 8});
  CHECK(as_vector(batch.targets) == std::vector<int64_t>{2, 3, kSep, x, /**/ kSep, x, x, x,
                                                         /**/ 6, 7, 8, 1});
  // The last document has no separator after it in the shard; its example still ends with one.
  const DocumentExamples last({span}, {documents[2]}, 4, kSep, kSep, 10);
  CHECK(as_vector(last.gather({0}).targets) == std::vector<int64_t>{kSep, x, x, x});

  CHECK_THROWS_WITH(DocumentExamples({span}, documents, 4, kSep, kSep, 9),
                    "mem: token id 9 >= vocab_size 9; set --vocab_size to at least 10");
  CHECK_THROWS_WITH(DocumentExamples({span}, {documents[1]}, 4, std::nullopt, 0, 10),
                    "mem: none of its 1 documents has two tokens or more: nothing to learn from");
}

TEST_CASE("small splits: the training batch shrinks to the split, validation is one batch",
          "[data][loader][small]") {
  CHECK(fitted_batch_size(1000, 128, 1, "d") == 128);
  CHECK(fitted_batch_size(94, 128, 1, "d") == 94);
  CHECK(fitted_batch_size(256, 128, 2, "d") == 128);
  CHECK(fitted_batch_size(255, 128, 2, "d") == 127);  // one sample unused per epoch
  CHECK(fitted_batch_size(3, 128, 2, "d") == 1);
  CHECK_THROWS_WITH(fitted_batch_size(0, 128, 1, "text:x"),
                    "the training split of text:x is empty: add data or lower val_fraction");
  CHECK_THROWS_WITH(fitted_batch_size(3, 128, 4, "text:x"),
                    "the training split of text:x has 3 samples, fewer than the 4 ranks: add data "
                    "or use fewer ranks");

  ampt::config::Config config;
  config.batch_size = 8;
  const auto val = [&](int64_t samples) {
    return val_loader_options(ampt::data::train_loader_options(config, torch::kCPU),
                              config.dataset, samples, config.batch_size);
  };
  const auto small = val(5);
  CHECK(small.batch_size == 5);
  const auto data = std::make_shared<ampt::test::IndexDataset>(5);
  Loader loader(data, small);
  CHECK(loader.batches_per_epoch() == 1);
  CHECK(as_vector(loader.next().targets) == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(val(20).batch_size == 8);
  // The last, incomplete batch is evaluated too: the whole split, whatever the batch size.
  Loader all(std::make_shared<ampt::test::IndexDataset>(20), val(20));
  CHECK(all.batches_per_epoch() == 3);
  all.next();
  all.next();
  CHECK(as_vector(all.next().targets) == std::vector<int64_t>{16, 17, 18, 19});
  // Two ranks: a split smaller than the global batch is evaluated whole by each.
  config.launch.world_size = 2;
  config.launch.rank = 1;
  const auto whole = val(12);
  CHECK(whole.shard_count == 1);
  CHECK(whole.batch_size == 8);
}
