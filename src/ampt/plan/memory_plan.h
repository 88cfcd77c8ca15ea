// The training setup that fits a GPU: from the memory estimate, the precision, opt level,
// micro-batch, gradient accumulation and activation checkpointing to train a model with.
#pragma once

#include "ampt/config/config.h"
#include "ampt/plan/memory_estimate.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ampt::plan {

// What the GPU offers: usable memory is gpu_memory × (1 − kFragmentation) − kContextBytes.
struct GpuTarget {
  double memory_gb = 80.0;          // GiB
  double compute_capability = 9.0;  // bf16 from 8.0, fp8 from 8.9
};
constexpr double kFragmentation = 0.10;  // caching-allocator slack and fragmentation
constexpr int64_t kContextBytes = int64_t{1} << 30;  // CUDA context, cuBLAS/cuDNN workspaces
int64_t usable_bytes(const GpuTarget& gpu);

struct Recommendation {
  bool fits = false;
  Scheme scheme;
  bool checkpointing = false;
  int64_t micro_batch = 0;
  int64_t grad_accum = 0;
  int64_t estimate_bytes = 0;
  std::vector<std::string> reasons;  // one sentence each
};

// Picks, in this order of preference, the first of: O1, O1 with activation checkpointing (GPT),
// O2, O2 with checkpointing, in bf16 (fp16 below compute capability 8.0), that fits a
// micro-batch of at least min(8, global_batch); else whichever fits the largest micro-batch.
// Micro-batches are the divisors of global_batch, so the accumulation is whole. With
// `sharding`, global_batch is one rank's share and every estimate is per rank (shard_memory).
Recommendation recommend(const ModelDims& dims, config::OptimizerKind optimizer, double momentum,
                         int64_t global_batch, const GpuTarget& gpu, const Sharding& sharding = {});

// The precision and opt level a run of `config` trains in on `gpu`: fp32/O0 for
// --mixed_precision no or --amp_opt_level O0; auto as `--mixed_precision auto` picks on a GPU of
// that compute capability; bf16 on a GPU without it as fp16, fp8 without it as auto (training
// falls back or refuses alike); otherwise the precision with its opt level (fp8: O1).
Scheme run_scheme(const config::Config& config, const GpuTarget& gpu);

// The fewest ranks, a power of two up to max_ranks, on which ZeRO stage 3 (with `sharding`'s
// param and reduce dtypes) fits one rank's estimate of `scheme` at `micro_batch` into the GPU's
// usable memory.
struct RanksToFit {
  int64_t ranks = 0;           // 0: not even max_ranks fit
  int64_t bytes = 0;           // per rank on `ranks` (on max_ranks when none fit)
  // Per rank on ranks / 2; -1 when ranks is 0, 1 or the fewest expert parallelism allows.
  int64_t fewer_bytes = -1;
  int64_t unsharded = 0;       // per rank what no number of ranks shrinks (MemoryEstimate::sharded)
};
RanksToFit fewest_ranks(const ModelDims& dims, const Scheme& scheme, bool checkpointing,
                        config::OptimizerKind optimizer, double momentum, int64_t micro_batch,
                        const GpuTarget& gpu, const Sharding& sharding, int64_t max_ranks = 1024);

}  // namespace ampt::plan
