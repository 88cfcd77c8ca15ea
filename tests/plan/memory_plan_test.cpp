// The plan `ampt recommend` prints: which precision, opt level, micro-batch and accumulation fit
// a GPU.
#include "ampt/plan/memory_plan.h"

#include <catch2/catch.hpp>

using ampt::config::Config;
using ampt::config::OptimizerKind;
using ampt::plan::GpuTarget;
using ampt::models::Precision;
using ampt::config::OptLevel;

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
  const auto m = ampt::plan::estimate_memory(dims, scheme, OptimizerKind::adamw, 0.9, micro_batch);
  return checkpointed ? m.total_checkpointed() : m.total();
}

}  // namespace

TEST_CASE("recommend: gpt2-124m on an 80 GiB Hopper GPU trains bf16 O1 at the largest micro-batch that fits",
          "[recommend]") {
  const auto dims = dims_of("gpt2-124m");
  const GpuTarget gpu{80.0, 9.0};
  const auto r = ampt::plan::recommend(dims, OptimizerKind::adamw, 0.9, 512, gpu);
  REQUIRE(r.fits);
  CHECK(r.scheme.name() == "bf16/O1");
  CHECK_FALSE(r.checkpointing);
  CHECK(r.micro_batch * r.grad_accum == 512);
  // The largest divisor of 512 that fits: the next one up does not.
  const int64_t usable = ampt::plan::usable_bytes(gpu);
  CHECK(usable == static_cast<int64_t>(80.0 * 0.9 * (1 << 30)) - (int64_t{1} << 30));
  CHECK(total(dims, {Precision::bf16, OptLevel::O1}, r.micro_batch) <= usable);
  CHECK(total(dims, {Precision::bf16, OptLevel::O1}, 2 * r.micro_batch) > usable);
  // With the fused head and MLP (the default) 256; the plain head's 12 bytes per logit and the
  // kept GELU outputs allow 64.
  CHECK(r.micro_batch == 256);
  CHECK_THAT(r.reasons[0], Catch::StartsWith("bf16: compute capability 9.0 has bf16 tensor cores"));
  CHECK_THAT(r.reasons[1], Catch::StartsWith("fp8 (--mixed_precision fp8)"));
  Config plain;
  plain.model = "gpt2-124m";
  plain.fused_kernels = ampt::config::AutoSwitch::off;
  CHECK(ampt::plan::recommend(ampt::models::model_dims(plain, {}, 0), OptimizerKind::adamw, 0.9,
                                512, gpu)
            .micro_batch == 64);
}

TEST_CASE("recommend: gpt2-774m and gpt2-1558m on an 80 GiB Hopper GPU", "[recommend]") {
  // GPT-2 XL's state alone, bf16/O1 with AdamW: 16 bytes per parameter (fp32 weight, gradient,
  // two moments) and the 2-byte bf16 cast copy of each matmul weight, 48·12·1600² + 50304·1600 =
  // 1,555,046,400 of the 1,557,686,400 parameters: 24,922,982,400 + 3,110,092,800 bytes.
  const auto xl = dims_of("gpt2-1558m");
  CHECK(ampt::plan::estimate_memory(xl, {Precision::bf16, OptLevel::O1}, OptimizerKind::adamw, 0.9, 1)
            .persistent() == 28'033'075'200);
  const GpuTarget gpu{80.0, 9.0};
  const int64_t usable = ampt::plan::usable_bytes(gpu);
  for (const auto* model : {"gpt2-774m", "gpt2-1558m"}) {
    INFO(model);
    const auto dims = dims_of(model);
    const auto r = ampt::plan::recommend(dims, OptimizerKind::adamw, 0.9, 512, gpu);
    REQUIRE(r.fits);
    CHECK(r.scheme.name() == "bf16/O1");
    CHECK_FALSE(r.checkpointing);
    CHECK(r.micro_batch * r.grad_accum == 512);
    CHECK(total(dims, {Precision::bf16, OptLevel::O1}, r.micro_batch) <= usable);
    CHECK(total(dims, {Precision::bf16, OptLevel::O1}, 2 * r.micro_batch) > usable);
    // The benchmark plan's batch sizes (benchmarks/run.py) fit, in bf16 and in fp8.
    const int64_t planned = std::string(model) == "gpt2-774m" ? 16 : 8;
    CHECK(r.micro_batch >= planned);
    CHECK(total(dims, {Precision::fp8, OptLevel::O1}, planned) <= usable);
  }
}

TEST_CASE("recommend: fp16 with the loss scaler before compute capability 8.0, and no fp8", "[recommend]") {
  const auto r = ampt::plan::recommend(dims_of("gpt2-124m"), OptimizerKind::adamw, 0.9, 64,
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
  const auto r = ampt::plan::recommend(dims, OptimizerKind::adamw, 0.9, 64, gpu);
  REQUIRE(r.fits);
  CHECK(r.scheme.name() == "bf16/O1");
  CHECK(r.checkpointing);
  CHECK(r.micro_batch >= 8);
  CHECK(total(dims, {Precision::bf16, OptLevel::O1}, 8) > ampt::plan::usable_bytes(gpu));
  CHECK(total(dims, {Precision::bf16, OptLevel::O1}, r.micro_batch, true) <= ampt::plan::usable_bytes(gpu));
}

TEST_CASE("recommend: a model whose state alone exceeds the GPU fits nowhere", "[recommend]") {
  const auto r = ampt::plan::recommend(dims_of("gpt2-350m"), OptimizerKind::adamw, 0.9, 8,
                                        GpuTarget{4.0, 9.0});
  CHECK_FALSE(r.fits);
  REQUIRE(r.reasons.size() == 1);
  CHECK_THAT(r.reasons[0], Catch::StartsWith("Nothing fits: even a micro-batch of 1 needs more"));
}

TEST_CASE("recommend: the fewest ranks on which ZeRO stage 3 fits llama-3.1-8b on an 80 GiB GPU",
          "[recommend][zero]") {
  const auto dims = dims_of("llama-3.1-8b");
  REQUIRE(dims.seq_len == 2048);
  const GpuTarget gpu{80.0, 9.0};
  // By hand, bf16/O1 with AdamW at micro-batch 1 with activation checkpointing; P =
  // 8,030,261,248 (a multiple of 1024, so every slice is exact). A block: Linear weights
  // 2·4096² + 2·4096·1024 + 3·4096·14336 = 218,103,808, norms 2·4096; the root: embed_tokens and
  // lm_head 2·128256·4096 = 1,050,672,128 and the final norm 4096: 1,050,677,248.
  // - whatever the ranks: the root in fp32, weights and gradients, 2 · 4,202,708,992; two blocks
  //   in bf16 with fp32 norms, weights and gradients, 2 · 2 · 436,240,384; lm_head's bf16 cast
  //   2 · 525,336,576 = 1,050,673,152: 11,201,052,672 bytes;
  // - the activations checkpointed (2048 tokens): each block's fp32 input, 32 · 2048 · 4096 · 4
  //   = 1,073,741,824, one block's saved tensors 2048 · 196,744 = 402,931,712 (per token
  //   2·(4·4096 + 4 + 2·4096) + 2·(4096 + 2·1024)·2 + 2·4096 + 32·4 + 4·14336·2), the data
  //   2048 · 16 and the norm's statistics 2048 · 4, the fused head 2048 · 4096 · 10 +
  //   8 · 128256 · 4096 + 523 · 128256 · 4 = 4,554,890,240: 6,031,604,736;
  // - sharded: fp32 masters, fp32 gradients and AdamW's moments, 16 · P / N =
  //   128,484,179,968 / N.
  // Usable: 80 · 0.9 − 1 = 71 GiB = 76,235,669,504 bytes, of which 76,235,669,504 −
  // 17,232,657,408 = 59,003,012,096 are left for the shards: 2 ranks need 64,242,089,984, 4 ranks
  // 32,121,044,992. So 4 ranks, at 49,353,702,400 bytes each (81,474,747,392 on 2).
  ampt::plan::Sharding sharding;
  const auto r = ampt::plan::fewest_ranks(dims, {Precision::bf16, OptLevel::O1}, true, OptimizerKind::adamw, 0.9,
                                            1, gpu, sharding);
  CHECK(r.ranks == 4);
  CHECK(r.bytes == 49'353'702'400);
  CHECK(r.fewer_bytes == 81'474'747'392);
  CHECK(r.unsharded == 17'232'657'408);
  // At 128 samples of 2048 tokens per micro-batch the activations alone exceed the GPU.
  const auto big = ampt::plan::fewest_ranks(dims, {Precision::bf16, OptLevel::O1}, false, OptimizerKind::adamw,
                                              0.9, 128, gpu, sharding);
  CHECK(big.ranks == 0);
  CHECK(big.unsharded > ampt::plan::usable_bytes(gpu));
  // gpt2-124m fits one GPU without sharding.
  CHECK(ampt::plan::fewest_ranks(dims_of("gpt2-124m"), {Precision::bf16, OptLevel::O1}, false,
                                   OptimizerKind::adamw, 0.9, 8, gpu, sharding)
            .ranks == 1);
}

TEST_CASE("recommend: the run's precision and opt level", "[recommend]") {
  Config c;
  const GpuTarget hopper{80.0, 9.0}, volta{32.0, 7.0};
  CHECK(ampt::plan::run_scheme(c, hopper).name() == "bf16/O1");
  CHECK(ampt::plan::run_scheme(c, volta).name() == "fp16/O1");
  c.amp_opt_level = ampt::config::OptLevel::O2;
  CHECK(ampt::plan::run_scheme(c, hopper).name() == "bf16/O2");
  c.mixed_precision = ampt::config::MixedPrecision::bf16;
  CHECK(ampt::plan::run_scheme(c, volta).name() == "fp16/O2");
  c.mixed_precision = ampt::config::MixedPrecision::fp8;
  CHECK(ampt::plan::run_scheme(c, hopper).name() == "fp8/O1");
  c.mixed_precision = ampt::config::MixedPrecision::no;
  CHECK(ampt::plan::run_scheme(c, hopper).name() == "fp32/O0");
}
