// The plan `ampt recommend` prints: which precision, opt level, micro-batch and accumulation fit
// a GPU.
#include "ampt/models/memory_plan.h"

#include <catch2/catch.hpp>

using ampt::config::Config;
using ampt::config::OptimizerKind;
using ampt::models::GpuTarget;

namespace {

ampt::models::ModelDims dims_of(const std::string& model, int64_t n_layer = 0, int64_t n_embd = 0,
                               int64_t n_head = 0, int64_t vocab = 0, int64_t block = 0) {
  Config c;
  c.model = model;
  c.n_layer = n_layer;
  c.n_embd = n_embd;
  c.n_head = n_head;
  c.vocab_size = vocab;
  c.block_size = block;
  return ampt::models::model_dims(c, {}, 0);
}

int64_t total(const ampt::models::ModelDims& dims, const ampt::models::Scheme& scheme,
              int64_t micro_batch, bool checkpointed = false) {
  const auto m = ampt::models::estimate_memory(dims, scheme, OptimizerKind::adamw, 0.9, micro_batch);
  return checkpointed ? m.total_checkpointed() : m.total();
}

}  // namespace

TEST_CASE("recommend: gpt2-124m on an 80 GiB Hopper GPU trains bf16 O1 at the largest micro-batch that fits",
          "[recommend]") {
  const auto dims = dims_of("gpt2-124m");
  const GpuTarget gpu{80.0, 9.0};
  const auto r = ampt::models::recommend(dims, OptimizerKind::adamw, 0.9, 512, gpu);
  REQUIRE(r.fits);
  CHECK(r.scheme.name() == "bf16/O1");
  CHECK_FALSE(r.checkpointing);
  CHECK(r.micro_batch * r.grad_accum == 512);
  // The largest divisor of 512 that fits: the next one up does not.
  const int64_t usable = ampt::models::usable_bytes(gpu);
  CHECK(usable == static_cast<int64_t>(80.0 * 0.9 * (1 << 30)) - (int64_t{1} << 30));
  CHECK(total(dims, {"bf16", "O1"}, r.micro_batch) <= usable);
  CHECK(total(dims, {"bf16", "O1"}, 2 * r.micro_batch) > usable);
  // With the fused head and MLP (the default) 256; the plain head's 12 bytes per logit and the
  // kept GELU outputs allow 64.
  CHECK(r.micro_batch == 256);
  CHECK_THAT(r.reasons[0], Catch::StartsWith("bf16: compute capability 9.0 has bf16 tensor cores"));
  CHECK_THAT(r.reasons[1], Catch::StartsWith("fp8 (--mixed_precision fp8)"));
  Config plain;
  plain.model = "gpt2-124m";
  plain.fused_kernels = false;
  CHECK(ampt::models::recommend(ampt::models::model_dims(plain, {}, 0), OptimizerKind::adamw, 0.9,
                                512, gpu)
            .micro_batch == 64);
}

TEST_CASE("recommend: gpt2-774m and gpt2-1558m on an 80 GiB Hopper GPU", "[recommend]") {
  // GPT-2 XL's state alone, bf16/O1 with AdamW: 16 bytes per parameter (fp32 weight, gradient,
  // two moments) and the 2-byte bf16 cast copy of each matmul weight, 48·12·1600² + 50304·1600 =
  // 1,555,046,400 of the 1,557,686,400 parameters: 24,922,982,400 + 3,110,092,800 bytes.
  const auto xl = dims_of("gpt2-1558m");
  CHECK(ampt::models::estimate_memory(xl, {"bf16", "O1"}, OptimizerKind::adamw, 0.9, 1)
            .persistent() == 28'033'075'200);
  const GpuTarget gpu{80.0, 9.0};
  const int64_t usable = ampt::models::usable_bytes(gpu);
  for (const auto* model : {"gpt2-774m", "gpt2-1558m"}) {
    INFO(model);
    const auto dims = dims_of(model);
    const auto r = ampt::models::recommend(dims, OptimizerKind::adamw, 0.9, 512, gpu);
    REQUIRE(r.fits);
    CHECK(r.scheme.name() == "bf16/O1");
    CHECK_FALSE(r.checkpointing);
    CHECK(r.micro_batch * r.grad_accum == 512);
    CHECK(total(dims, {"bf16", "O1"}, r.micro_batch) <= usable);
    CHECK(total(dims, {"bf16", "O1"}, 2 * r.micro_batch) > usable);
    // The benchmark plan's batch sizes (benchmarks/run.py) fit, in bf16 and in fp8.
    const int64_t planned = std::string(model) == "gpt2-774m" ? 16 : 8;
    CHECK(r.micro_batch >= planned);
    CHECK(total(dims, {"fp8", "O1"}, planned) <= usable);
  }
}

TEST_CASE("recommend: fp16 with the loss scaler before compute capability 8.0, and no fp8", "[recommend]") {
  const auto r = ampt::models::recommend(dims_of("gpt2-124m"), OptimizerKind::adamw, 0.9, 64,
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
  const auto r = ampt::models::recommend(dims, OptimizerKind::adamw, 0.9, 64, gpu);
  REQUIRE(r.fits);
  CHECK(r.scheme.name() == "bf16/O1");
  CHECK(r.checkpointing);
  CHECK(r.micro_batch >= 8);
  CHECK(total(dims, {"bf16", "O1"}, 8) > ampt::models::usable_bytes(gpu));
  CHECK(total(dims, {"bf16", "O1"}, r.micro_batch, true) <= ampt::models::usable_bytes(gpu));
}

TEST_CASE("recommend: a model whose state alone exceeds the GPU fits nowhere", "[recommend]") {
  const auto r = ampt::models::recommend(dims_of("gpt2-350m"), OptimizerKind::adamw, 0.9, 8,
                                        GpuTarget{4.0, 9.0});
  CHECK_FALSE(r.fits);
  REQUIRE(r.reasons.size() == 1);
  CHECK_THAT(r.reasons[0], Catch::StartsWith("Nothing fits: even a micro-batch of 1 needs more"));
}
