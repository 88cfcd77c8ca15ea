// `ampt recommend`: memory per precision and opt level for a model on a GPU of a given size, and
// the precision, opt level, micro-batch and gradient accumulation to train it with.
#pragma once

#include "ampt/train/memory_estimate.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ampt::train {

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
// Micro-batches are the divisors of global_batch, so the accumulation is whole.
Recommendation recommend(const ModelDims& dims, config::OptimizerKind optimizer, double momentum,
                         int64_t global_batch, const GpuTarget& gpu);

std::string recommend_help();

// `args` after `recommend`; returns the table and the recommendation as text. Throws UsageError
// for bad flags.
std::string run_recommend(const std::vector<std::string>& args,
                          const std::map<std::string, std::string>& env);

}  // namespace ampt::train
