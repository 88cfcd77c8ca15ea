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
  CHECK(parse_dataset_spec("text:a:b")->path == "a:b");  // only the first colon separates
  for (const char* bad : {"", "mnist", "mnist:", "synthetic:x", "imagenet:/d", ":x", "Text:x"}) {
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
                    "synthetic, text:FILE, tokens:PATH_OR_GLOB, mnist:DIR, fashion-mnist:DIR or "
                    "cifar10:DIR");
}
