// The ResNet-style CNN: shapes, parameter and FLOP counts, BatchNorm modes, training.
#include "ampt/core/errors.h"
#include "ampt/models/cnn.h"
#include "ampt/models/registry.h"
#include "models/overfit.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

using ampt::config::Config;
using ampt::config::MixedPrecision;
using ampt::data::DataSpec;
using ampt::data::Task;

namespace {

Config small_cnn() {
  Config config;
  config.model = "cnn";
  config.cnn_channels = 4;
  config.cnn_blocks = 2;
  return config;
}

const DataSpec kImages{Task::classification, {3, 8, 8}, 10};

// Parameters of a basic block: two 3x3 convs without bias, a BatchNorm (weight + bias) after
// each, and a 1x1 conv + BatchNorm shortcut where the width changes.
int64_t block_parameters(int64_t in, int64_t out) {
  const int64_t shortcut = in == out ? 0 : in * out + 2 * out;
  return 9 * in * out + 2 * out + 9 * out * out + 2 * out + shortcut;
}

// Stem (3x3 conv + BN), three stages of widths c, 2c, 4c, then the linear head.
int64_t cnn_parameters(int64_t in_channels, int64_t c, int64_t blocks, int64_t classes) {
  int64_t count = 9 * in_channels * c + 2 * c;
  int64_t in = c;
  for (int64_t out : {c, 2 * c, 4 * c}) {
    count += block_parameters(in, out) + (blocks - 1) * block_parameters(out, out);
    in = out;
  }
  return count + in * classes + classes;
}

}  // namespace

TEST_CASE("cnn: logits are [B, classes] for any image size", "[models][cnn]") {
  auto model = ampt::models::make_model(small_cnn(), kImages);
  CHECK(model.forward(torch::randn({5, 3, 8, 8})).sizes() == torch::IntArrayRef({5, 10}));
  auto odd = ampt::models::make_model(small_cnn(), DataSpec{Task::classification, {1, 7, 5}, 4});
  CHECK(odd.forward(torch::randn({2, 1, 7, 5})).sizes() == torch::IntArrayRef({2, 4}));
  CHECK(model.tokens_per_sample == 1);
  CHECK(model.architecture == "input 3x8x8, 3 stages of 2 blocks, channels 4..16, classes 10");
}

TEST_CASE("cnn: parameter count by formula", "[models][cnn]") {
  auto model = ampt::models::make_model(small_cnn(), kImages);
  // By hand: stem 9·3·4 + 8 = 116; stage 1: 2 · (144 + 8 + 144 + 8) = 608; stage 2: 944 + 1,184
  // = 2,128 (the first block has the 1x1 shortcut, 32 + 16); stage 3: 3,680 + 4,672 = 8,352;
  // head 16·10 + 10 = 170. Total 11,374.
  CHECK(cnn_parameters(3, 4, 2, 10) == 11'374);
  CHECK(ampt::models::parameter_count(*model.module) == 11'374);
  Config wide;
  wide.model = "cnn";  // defaults: 32 channels, 1 block per stage
  CHECK(ampt::models::parameter_count(*ampt::models::make_model(wide, kImages).module) ==
        cnn_parameters(3, 32, 1, 10));
}

TEST_CASE("cnn: FLOPs per sample are 6 per multiply-accumulate", "[models][cnn]") {
  auto model = ampt::models::make_model(small_cnn(), kImages);
  // Forward MACs, conv weights times output pixels: stem 108 · 64 = 6,912; stage 1 at 8x8:
  // 2 · (144 + 144) · 64 = 36,864; stage 2 at 4x4: (288 + 576 + 32 + 576 + 576) · 16 = 32,768;
  // stage 3 at 2x2: (1,152 + 2,304 + 128 + 2,304 + 2,304) · 4 = 32,768; head 160.
  // 109,472 MACs → 656,832 training FLOPs.
  CHECK(model.flops_per_sample == 656'832);
}

TEST_CASE("cnn: BatchNorm normalises by batch in training and by running stats in eval",
          "[models][cnn]") {
  torch::manual_seed(2);
  auto model = ampt::models::make_model(small_cnn(), kImages);
  int batch_norms = 0;
  for (const auto& m : model.module->modules())
    batch_norms += m->as<torch::nn::BatchNorm2d>() != nullptr;
  CHECK(batch_norms == 1 + 3 * 2 * 2 + 2);  // stem, two per block, two strided shortcuts

  const auto buffers = model.module->named_buffers();
  const auto running_mean = buffers["stem_bn.running_mean"];
  const auto x = torch::randn({6, 3, 8, 8}) * 3 + 1;
  torch::NoGradGuard no_grad;

  model.module->train();
  const auto full = model.forward(x);
  CHECK(running_mean.abs().sum().item<double>() > 0.0);  // updated from its initial zeros
  CHECK(buffers["stem_bn.num_batches_tracked"].item<int64_t>() == 1);
  // Batch statistics: a sample's logits depend on the rest of the batch.
  CHECK_FALSE(torch::allclose(model.forward(x.slice(0, 0, 2)), full.slice(0, 0, 2)));

  model.module->eval();
  const auto frozen = running_mean.clone();
  const auto eval_full = model.forward(x);
  CHECK(torch::equal(running_mean, frozen));
  CHECK(buffers["stem_bn.num_batches_tracked"].item<int64_t>() == 2);
  // Running statistics: each sample is on its own.
  CHECK(torch::allclose(model.forward(x.slice(0, 0, 2)), eval_full.slice(0, 0, 2), 1e-5, 1e-6));
}

TEST_CASE("cnn: non-image data is a usage error", "[models][cnn]") {
  CHECK_THROWS_AS(ampt::models::make_model(small_cnn(), DataSpec{Task::classification, {32}, 10}),
                  ampt::UsageError);
  CHECK_THROWS_WITH(ampt::models::make_model(small_cnn(), DataSpec{Task::classification, {32}, 10}),
                    "model cnn needs classification images of shape {channels, height, width}; "
                    "the dataset gives classification samples of shape {32}");
}

TEST_CASE("cnn: overfits one batch in fp32, bf16 and fp16", "[models][cnn]") {
  for (auto precision : {MixedPrecision::no, MixedPrecision::bf16, MixedPrecision::fp16}) {
    INFO("precision " << static_cast<int>(precision));
    torch::manual_seed(9);
    auto model = ampt::models::make_model(small_cnn(), kImages);
    const auto images = torch::randn({16, 3, 8, 8});
    const auto labels = torch::randint(0, 10, {16}, torch::kInt64);
    const auto loss = ampt_test::overfit(model, images, labels, precision, 30, 1e-2);
    CHECK(loss.last < 0.5 * loss.first);
  }
}
