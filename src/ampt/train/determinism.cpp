#include "ampt/train/determinism.h"

#include <ATen/Context.h>
#include <torch/utils.h>

#include <cstdlib>

namespace ampt::train {

void apply_determinism(bool deterministic, int64_t seed) {
  if (!deterministic) return;
  // cuBLAS is deterministic only with a fixed workspace configuration, read when its handle is
  // created; torch refuses deterministic CUDA matmuls without it. A value the user set is kept.
  setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  auto& context = at::globalContext();
  // warn_only = false: an op without a deterministic kernel stops the run instead of quietly
  // breaking the promise.
  context.setDeterministicAlgorithms(true, /*warn_only=*/false);
  context.setDeterministicCuDNN(true);
  context.setBenchmarkCuDNN(false);
  // CPU and every CUDA device: dropout and any other sampling start from the seed.
  torch::manual_seed(static_cast<uint64_t>(seed));
}

}  // namespace ampt::train
