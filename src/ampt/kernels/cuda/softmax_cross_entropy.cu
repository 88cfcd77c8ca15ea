// One block per row: an online max/sum-of-exponentials pass, then (for training) the gradient
// written over the logits. The loss is per row, summed by the caller in a fixed order, so the
// result is deterministic.
#include "ampt/kernels/cuda/element.cuh"
#include "ampt/kernels/cuda/launch.h"

#include <math_constants.h>

#include <cfloat>

namespace ampt::kernels::cuda {
namespace {

constexpr int kThreads = 512;

// (max, sum of exp(v - max)) of two partial results.
__device__ void merge(float& m, float& s, float other_m, float other_s) {
  const float top = fmaxf(m, other_m);
  if (top == -FLT_MAX) return;
  s = s * __expf(m - top) + other_s * __expf(other_m - top);
  m = top;
}

template <class T>
__global__ void softmax_cross_entropy_kernel(T* logits, int64_t cols, int64_t valid,
                                             const int64_t* targets, int64_t ignore_index,
                                             float* row_loss, bool write_grad) {
  __shared__ float shared_m[kThreads / 32];
  __shared__ float shared_s[kThreads / 32];
  __shared__ float row_lse;
  T* row = logits + static_cast<int64_t>(blockIdx.x) * cols;
  const int64_t target = targets[blockIdx.x];
  const bool ignored = target == ignore_index;
  // A target outside the row is never read: its loss and gradient are NaN, so the step that
  // took it is skipped (the host checks targets first, classifier_loss, where it can).
  const bool bad = !ignored && (target < 0 || target >= valid);

  float m = -FLT_MAX, s = 0.0f;
  for (int64_t j = threadIdx.x; j < valid; j += blockDim.x) {
    const float v = to_float(row[j]);
    const float top = fmaxf(m, v);
    s = s * __expf(m - top) + __expf(v - top);
    m = top;
  }
  for (int offset = 16; offset > 0; offset >>= 1) {
    merge(m, s, __shfl_xor_sync(0xffffffff, m, offset), __shfl_xor_sync(0xffffffff, s, offset));
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    shared_m[warp] = m;
    shared_s[warp] = s;
  }
  __syncthreads();
  if (warp == 0) {
    m = lane < blockDim.x / 32 ? shared_m[lane] : -FLT_MAX;
    s = lane < blockDim.x / 32 ? shared_s[lane] : 0.0f;
    for (int offset = 16; offset > 0; offset >>= 1) {
      merge(m, s, __shfl_xor_sync(0xffffffff, m, offset), __shfl_xor_sync(0xffffffff, s, offset));
    }
    if (lane == 0) {
      row_lse = m + __logf(s);
      // Read before any thread overwrites the row with its gradient (after the barrier below).
      row_loss[blockIdx.x] = ignored ? 0.0f : bad ? CUDART_NAN_F : row_lse - to_float(row[target]);
    }
  }
  __syncthreads();
  if (!write_grad) return;
  const float lse = row_lse;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    float g = 0.0f;
    if (bad) {
      g = CUDART_NAN_F;
    } else if (!ignored && j < valid) {
      g = __expf(to_float(row[j]) - lse) - (j == target ? 1.0f : 0.0f);
    }
    row[j] = from_float<T>(g);
  }
}

}  // namespace

KernelImage softmax_cross_entropy_image() { return image_of(softmax_cross_entropy_kernel<float>, 0); }

void softmax_cross_entropy(void* logits, Dtype dtype, int64_t rows, int64_t cols, int64_t valid,
                           const int64_t* targets, int64_t ignore_index, float* row_loss,
                           bool write_grad, void* stream) {
  if (rows == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  const dim3 grid(static_cast<unsigned>(rows)), block(kThreads);
  switch (dtype) {
    case Dtype::float32:
      softmax_cross_entropy_kernel<<<grid, block, 0, s>>>(static_cast<float*>(logits), cols, valid,
                                                          targets, ignore_index, row_loss, write_grad);
      break;
    case Dtype::bfloat16:
      softmax_cross_entropy_kernel<<<grid, block, 0, s>>>(static_cast<__nv_bfloat16*>(logits), cols,
                                                          valid, targets, ignore_index, row_loss,
                                                          write_grad);
      break;
    case Dtype::float16:
      softmax_cross_entropy_kernel<<<grid, block, 0, s>>>(static_cast<__half*>(logits), cols, valid,
                                                          targets, ignore_index, row_loss, write_grad);
      break;
  }
  check_launch("softmax_cross_entropy kernel launch");
}

}  // namespace ampt::kernels::cuda
