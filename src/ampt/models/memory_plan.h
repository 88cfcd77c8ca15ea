// The training setup that fits a GPU: from the memory estimate, the precision, opt level,
// micro-batch, gradient accumulation and activation checkpointing to train a model with.
#pragma once

#include "ampt/config/config.h"
#include "ampt/models/memory_estimate.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ampt::models {

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

}  // namespace ampt::models
