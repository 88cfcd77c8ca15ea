#include "ampt/core/errors.h"
#include "ampt/data/registry.h"
#include "ampt/data/split.h"
#include "ampt/data/synthetic.h"
#include "data/data_fixtures.h"
#include "support/process.h"

#include <catch2/catch.hpp>

#include <numeric>
#include <set>

using namespace ampt::data;
using ampt::config::Config;
using ampt::test::llmc_shard;
using ampt::test::make_temp_dir;
using ampt::test::uint16_tokens;
using ampt::test::write_file;

namespace {

Config small(const std::string& dataset) {
  Config config;
  config.dataset = dataset;
  config.synthetic_samples = 200;
  return config;
}

constexpr SampleRequest kFeatures{SampleRequest::Form::features, 0, 0};
constexpr SampleRequest kImages{SampleRequest::Form::images, 0, 0};
// Windows of 8 over a byte vocabulary.
constexpr SampleRequest kTokens{SampleRequest::Form::tokens, 8, 256};

std::vector<uint16_t> tokens(int n) {
  std::vector<uint16_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), uint16_t{0});
  return t;
}

}  // namespace

TEST_CASE("synthetic: features, images or tokens as requested", "[data][registry]") {
  const auto mlp = open_dataset(small("synthetic"), kFeatures);
  CHECK(mlp.spec.task == Task::classification);
  CHECK(mlp.spec.sample_shape == std::vector<int64_t>{32});
  CHECK(mlp.train->size() == 180);
  CHECK(mlp.val->size() == 20);
  CHECK(mlp.description == "synthetic features: 32 features, 10 classes; train 180 / val 20 samples");
  // The features are the embedded default's, unchanged: train + val are its samples.
  const SyntheticClassification reference(200, 32, 10, 1337);
  std::vector<int64_t> all(180);
  std::iota(all.begin(), all.end(), int64_t{0});
  const auto train = mlp.train->gather(all);
  CHECK(train.inputs.sizes() == torch::IntArrayRef({180, 32}));
  CHECK(torch::isin(train.inputs.select(1, 0), reference.inputs.select(1, 0)).all().item<bool>());

  const auto cnn = open_dataset(small("synthetic"), kImages);
  CHECK(cnn.spec.sample_shape == std::vector<int64_t>{3, 32, 32});
  const auto images = cnn.train->gather({0, 1});
  CHECK(images.inputs.sizes() == torch::IntArrayRef({2, 3, 32, 32}));
  CHECK(images.inputs.min().item<float>() >= 0.0F);
  CHECK(images.inputs.max().item<float>() <= 1.0F);
  CHECK(torch::equal(images.inputs, cnn.train->gather({0, 1}).inputs));  // a pure function of index

  for (const int64_t vocab : {256, 50304}) {
    const auto gpt = open_dataset(small("synthetic"), {SampleRequest::Form::tokens, 8, vocab});
    CHECK(gpt.spec.task == Task::language_model);
    CHECK(gpt.spec.sample_shape == std::vector<int64_t>{8});
    CHECK(gpt.spec.classes == vocab);
    CHECK(gpt.train->size() + gpt.val->size() == 200);
  }
  CHECK_THROWS_WITH(open_dataset(small("bogus:x"), kFeatures),
                    Catch::Contains("invalid dataset 'bogus:x': expected one of"));
  // Token data for a model that takes none.
  CHECK_THROWS_AS(open_dataset(small("text:README.md"), kFeatures), ampt::UsageError);
}

TEST_CASE("tokens: a directory or train.bin takes val.bin beside it", "[data][registry][tokens]") {
  const auto dir = make_temp_dir();
  write_file(dir + "/train.bin", uint16_tokens(tokens(81)));  // 10 windows of 8
  write_file(dir + "/val.bin", uint16_tokens(tokens(41)));    // 5
  for (const std::string& path : {dir, dir + "/train.bin"}) {
    const auto splits = open_dataset(small("tokens:" + path), kTokens);
    CHECK(splits.train->size() == 10);
    CHECK(splits.val->size() == 5);
    CHECK(splits.spec.classes == 256);
  }
  CHECK(open_dataset(small("tokens:" + dir), kTokens).description ==
        "tokens:" + dir + ": 1 file (nanoGPT), 81 tokens; val: 1 file (nanoGPT), 41 tokens; "
        "train 10 / val 5 windows of 8");
}

TEST_CASE("tokens: a glob takes every match, and the matching val glob", "[data][registry][tokens]") {
  const auto dir = make_temp_dir();
  write_file(dir + "/web_train_000001.bin", llmc_shard(tokens(17)));  // 2 windows each
  write_file(dir + "/web_train_000002.bin", uint16_tokens(tokens(17)));
  write_file(dir + "/web_val_000000.bin", llmc_shard(tokens(9)));
  const auto splits = open_dataset(small("tokens:" + dir + "/web_train_*.bin"), kTokens);
  CHECK(splits.train->size() == 4);
  CHECK(splits.val->size() == 1);
  CHECK_THAT(splits.description, Catch::Contains("2 files (llm.c + nanoGPT), 34 tokens; val: 1 file (llm.c)"));

  // No val files by name: a seeded val_fraction is held out.
  auto config = small("tokens:" + dir + "/web_*_00000[12].bin");
  config.val_fraction = 0.25;
  const auto held = open_dataset(config, kTokens);
  CHECK(held.train->size() == 3);
  CHECK(held.val->size() == 1);

  CHECK_THROWS_WITH(open_dataset(small("tokens:" + dir + "/nothing_*.bin"), kTokens),
                    Catch::Equals(dir + "/nothing_*.bin: no file matches"));
  CHECK_THROWS_WITH(open_dataset(small("tokens:" + dir + "/absent.bin"), kTokens),
                    Catch::Contains(dir + "/absent.bin: cannot open"));
}

TEST_CASE("text: byte windows with a held-out fraction, none when val_fraction is 0",
          "[data][registry][text]") {
  const auto dir = make_temp_dir();
  write_file(dir + "/t.txt", std::string(801, 'a'));  // 100 windows of 8
  auto config = small("text:" + dir + "/t.txt");
  const auto splits = open_dataset(config, kTokens);
  CHECK(splits.train->size() == 90);
  CHECK(splits.val->size() == 10);
  config.val_fraction = 0;
  const auto all = open_dataset(config, kTokens);
  CHECK(all.train->size() == 100);
  CHECK(all.val == nullptr);
  CHECK_THAT(all.description, Catch::EndsWith("train 100 / val none windows of 8"));
}

TEST_CASE("split: seeded, disjoint, covering, in base order", "[data][split]") {
  const auto base = std::make_shared<ampt::test::IndexDataset>(100);
  const auto a = split_dataset(base, 0.2, 7);
  const auto b = split_dataset(base, 0.2, 7);
  const auto c = split_dataset(base, 0.2, 8);
  CHECK(a.train->size() == 80);
  CHECK(a.val->size() == 20);
  CHECK(ampt::test::all_targets(*a.val) == ampt::test::all_targets(*b.val));
  CHECK(ampt::test::all_targets(*a.val) != ampt::test::all_targets(*c.val));
  std::set<int64_t> seen;
  for (const auto& part : {a.train, a.val}) {
    const auto indices = ampt::test::all_targets(*part);
    CHECK(std::ranges::is_sorted(indices));
    seen.insert(indices.begin(), indices.end());
  }
  CHECK(seen.size() == 100);
  CHECK(split_dataset(base, 0.0, 7).val == nullptr);
}
