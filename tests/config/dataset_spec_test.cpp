#include "ampt/config/dataset_spec.h"
#include "ampt/config/options.h"

#include <catch2/catch.hpp>

using namespace ampt::config;

TEST_CASE("dataset specs: synthetic or KIND:PATH", "[config][dataset]") {
  CHECK(parse_dataset_spec("synthetic")->kind == DatasetKind::synthetic);
  const auto tokens = parse_dataset_spec("tokens:data/fineweb_train_*.bin");
  REQUIRE(tokens);
  CHECK(tokens->kind == DatasetKind::tokens);
  CHECK(tokens->path == "data/fineweb_train_*.bin");
  CHECK(parse_dataset_spec("fashion-mnist:/d")->kind == DatasetKind::fashion_mnist);
  const auto jsonl = parse_dataset_spec("jsonl:data/*.jsonl");
  REQUIRE(jsonl);
  CHECK(jsonl->kind == DatasetKind::jsonl);
  CHECK(jsonl->path == "data/*.jsonl");
  CHECK(parse_dataset_spec("parquet:hub/gsm8k")->kind == DatasetKind::parquet);
  CHECK(parse_dataset_spec("arrow:saved/")->kind == DatasetKind::arrow);
  CHECK(is_record_data(DatasetKind::parquet));
  CHECK(is_record_data(DatasetKind::arrow));
  CHECK(is_record_data(DatasetKind::jsonl));
  CHECK_FALSE(is_record_data(DatasetKind::text));
  CHECK(parse_dataset_spec("text:a:b")->path == "a:b");  // only the first colon separates
  for (const char* bad : {"", "mnist", "mnist:", "jsonl:", "json:x", "synthetic:x", "imagenet:/d",
                          ":x", "Text:x"}) {
    INFO(bad);
    CHECK_FALSE(parse_dataset_spec(bad));
  }
}

TEST_CASE("the dataset option rejects malformed specs with the valid forms", "[config][dataset]") {
  Config config;
  const Option& option = *find_option("dataset");
  CHECK(option.store(config, "cifar10:/data/cifar"));
  CHECK(config.dataset == "cifar10:/data/cifar");
  CHECK_THROWS_WITH(option.set(config, "cifar", Source{Source::Kind::flag, "--dataset"}),
                    "invalid value 'cifar' for dataset (flag --dataset): expected one of "
                    "synthetic, text:PATH, jsonl:PATH, parquet:PATH, arrow:PATH, tokens:PATH_OR_GLOB, "
                    "mnist:DIR, fashion-mnist:DIR or cifar10:DIR");
}

TEST_CASE("text, JSON Lines and token files are language-model data", "[config][dataset]") {
  for (const auto kind : {DatasetKind::text, DatasetKind::jsonl, DatasetKind::tokens}) {
    CHECK(is_language_model_data(kind));
  }
  for (const auto kind : {DatasetKind::synthetic, DatasetKind::mnist, DatasetKind::fashion_mnist,
                          DatasetKind::cifar10}) {
    CHECK_FALSE(is_language_model_data(kind));
  }
}
