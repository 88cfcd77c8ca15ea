// `ampt recommend`: which precision, opt level, micro-batch and accumulation it picks for a GPU,
// and the command line around it.
#include "ampt/train/recommend.h"

#include "support/process.h"

#include <catch2/catch.hpp>

using ampt::config::Config;
using ampt::config::OptimizerKind;
using ampt::train::GpuTarget;

namespace {

ampt::train::ModelDims dims_of(const std::string& model, int64_t n_layer = 0, int64_t n_embd = 0,
                               int64_t n_head = 0, int64_t vocab = 0, int64_t block = 0) {
  Config c;
  c.model = model;
  c.n_layer = n_layer;
  c.n_embd = n_embd;
  c.n_head = n_head;
  c.vocab_size = vocab;
  c.block_size = block;
  return ampt::train::model_dims(c, {}, 0);
}

int64_t total(const ampt::train::ModelDims& dims, const ampt::train::Scheme& scheme,
              int64_t micro_batch, bool checkpointed = false) {
  const auto m = ampt::train::estimate_memory(dims, scheme, OptimizerKind::adamw, 0.9, micro_batch);
  return checkpointed ? m.total_checkpointed() : m.total();
}

}  // namespace

TEST_CASE("recommend: gpt2-124m on an 80 GiB Hopper GPU trains bf16 O1 at the largest micro-batch that fits",
          "[recommend]") {
  const auto dims = dims_of("gpt2-124m");
  const GpuTarget gpu{80.0, 9.0};
  const auto r = ampt::train::recommend(dims, OptimizerKind::adamw, 0.9, 512, gpu);
  REQUIRE(r.fits);
  CHECK(r.scheme.name() == "bf16/O1");
  CHECK_FALSE(r.checkpointing);
  CHECK(r.micro_batch * r.grad_accum == 512);
  // The largest divisor of 512 that fits: the next one up does not.
  const int64_t usable = ampt::train::usable_bytes(gpu);
  CHECK(usable == static_cast<int64_t>(80.0 * 0.9 * (1 << 30)) - (int64_t{1} << 30));
  CHECK(total(dims, {"bf16", "O1"}, r.micro_batch) <= usable);
  CHECK(total(dims, {"bf16", "O1"}, 2 * r.micro_batch) > usable);
  CHECK(r.micro_batch == 64);
  CHECK_THAT(r.reasons[0], Catch::StartsWith("bf16: compute capability 9.0 has bf16 tensor cores"));
  CHECK_THAT(r.reasons[1], Catch::StartsWith("fp8 (--mixed_precision fp8)"));
}

TEST_CASE("recommend: fp16 with the loss scaler before compute capability 8.0, and no fp8", "[recommend]") {
  const auto r = ampt::train::recommend(dims_of("gpt2-124m"), OptimizerKind::adamw, 0.9, 64,
                                        GpuTarget{32.0, 7.0});
  REQUIRE(r.fits);
  CHECK(r.scheme.name() == "fp16/O1");
  CHECK_THAT(r.reasons[0], Catch::StartsWith("fp16 with the dynamic loss scaler"));
  for (const auto& reason : r.reasons) CHECK_THAT(reason, !Catch::Contains("fp8"));
}

TEST_CASE("recommend: activation checkpointing when only a small micro-batch fits without it",
          "[recommend]") {
  // 24 layers of width 1024 with a small vocabulary: the blocks' activations dominate.
  const auto dims = dims_of("gpt", 24, 1024, 16, 256, 1024);
  const GpuTarget gpu{12.0, 9.0};
  const auto r = ampt::train::recommend(dims, OptimizerKind::adamw, 0.9, 64, gpu);
  REQUIRE(r.fits);
  CHECK(r.scheme.name() == "bf16/O1");
  CHECK(r.checkpointing);
  CHECK(r.micro_batch >= 8);
  CHECK(total(dims, {"bf16", "O1"}, 8) > ampt::train::usable_bytes(gpu));
  CHECK(total(dims, {"bf16", "O1"}, r.micro_batch, true) <= ampt::train::usable_bytes(gpu));
}

TEST_CASE("recommend: a model whose state alone exceeds the GPU fits nowhere", "[recommend]") {
  const auto r = ampt::train::recommend(dims_of("gpt2-350m"), OptimizerKind::adamw, 0.9, 8,
                                        GpuTarget{4.0, 9.0});
  CHECK_FALSE(r.fits);
  REQUIRE(r.reasons.size() == 1);
  CHECK_THAT(r.reasons[0], Catch::StartsWith("Nothing fits: even a micro-batch of 1 needs more"));
}

TEST_CASE("cli recommend: table, recommendation and usage errors", "[recommend][cli]") {
  auto r = ampt::test::run_ampt({"recommend", "--model", "gpt2-124m", "--global_batch", "512",
                                 "--batch_size", "16"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("Model gpt2-124m: 124,475,904 parameters"));
  CHECK_THAT(r.out, Catch::Contains("at micro-batch 16 (--batch_size)"));
  for (const auto* row : {"| fp32/O0 |", "| bf16/O1 |", "| bf16/O2 |", "| fp16/O1 |", "| fp16/O2 |",
                          "| fp8/O1 |"}) {
    CHECK_THAT(r.out, Catch::Contains(row));
  }
  CHECK_THAT(r.out, Catch::Contains("Recommendation for a global batch of 512: bf16 O1, micro-batch "
                                    "64 x 8 accumulation steps\n  ampt train --model gpt2-124m "
                                    "--mixed_precision bf16 --amp_opt_level O1 --batch_size 64 "
                                    "--grad_accum_steps 8\n"));

  r = ampt::test::run_ampt({"recommend", "--model", "mlp"});
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, !Catch::Contains("fp8/O1"));

  r = ampt::test::run_ampt({"recommend", "--gpu_memory_gb", "-1"});
  CHECK(r.exit_code == 2);
  CHECK(r.err == "ampt: error: invalid value '-1' for --gpu_memory_gb: expected a number > 0\n");
  r = ampt::test::run_ampt({"recommend", "--model", "cnn", "--input_shape", "3,a"});
  CHECK(r.exit_code == 2);
  CHECK(r.err == "ampt: error: invalid value '3,a' for --input_shape: expected positive integers "
                 "like 784 or 3,32,32\n");
  r = ampt::test::run_ampt({"recommend", "--model", "gpt-tiny", "--seq_len", "128"});
  CHECK(r.exit_code == 2);
  CHECK(r.err == "ampt: error: seq_len 128 exceeds block_size 64 of model gpt-tiny\n");
  r = ampt::test::run_ampt({"recommend", "--help"});
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("--gpu_memory_gb GB"));
}
