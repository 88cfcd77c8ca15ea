#include "ampt/data/loader.h"
#include "ampt/data/synthetic_images.h"
#include "ampt/data/token_file.h"
#include "data/data_fixtures.h"
#include "support/process.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <chrono>

using namespace ampt::data;

namespace {

// Samples per second of the loader alone, after a few warm-up batches.
double samples_per_second(std::shared_ptr<const Dataset> data, LoaderOptions options, int batches) {
  Loader loader(std::move(data), options);
  for (int i = 0; i < 3; ++i) loader.next();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < batches; ++i) loader.next();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return static_cast<double>(batches * options.batch_size) / seconds;
}

}  // namespace

TEST_CASE("loader throughput", "[.][bench]") {
  const auto dir = ampt::test::make_temp_dir();
  std::vector<uint16_t> tokens(1 << 24);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>((i * 7919) % 50257);
  ampt::test::write_file(dir + "/train.bin", ampt::test::llmc_shard(tokens));
  const auto windows = std::make_shared<TokenWindows>(
      std::vector{open_token_file(dir + "/train.bin").span}, 1024, 50257);
  const auto images = std::make_shared<SyntheticImages>(65536, 10, 1);

  for (const int64_t workers : {0, 2}) {
    LoaderOptions options;
    options.workers = workers;
    options.batch_size = 64;
    const double tokens_rate = samples_per_second(windows, options, 200);
    options.batch_size = 256;
    const double image_rate = samples_per_second(images, options, 40);
    fmt::print("loader, {} workers: tokens (llm.c, block 1024, batch 64): {:.0f} windows/s = "
               "{:.1f}M tokens/s; synthetic images (batch 256): {:.0f} images/s\n",
               workers, tokens_rate, tokens_rate * 1024 / 1e6, image_rate);
  }
}
