// AdamW over float32 parameters with torch.optim.AdamW's fused arithmetic (ATen's adam_math in
// ADAMW mode: the same expressions in the same types, float32 values with float64 coefficients),
// which also writes each stepped parameter's half copy: the weights an O1 forward reads are
// written here, once per step, instead of cast from the fp32 weights in every forward.
#include "ampt/kernels/cuda/element.cuh"
#include "ampt/kernels/cuda/launch.h"

#include <algorithm>
#include <cmath>

namespace ampt::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocksPerTensor = 1024;

// One tensor per blockIdx.y; the blocks along x stride over its elements.
template <class Copy>
__global__ void adamw_kernel(AdamWTensors t, AdamWHyper h) {
  if (h.found_inf != nullptr && *h.found_inf == 1.0f) return;
  const int k = blockIdx.y;
  const int64_t n = t.numels[k];
  const double lr = h.lr_tensor != nullptr ? static_cast<double>(*h.lr_tensor) : h.lr;
  const float step = *t.steps[k];
  const float bias_correction1 = 1 - ::pow(h.beta1, static_cast<double>(step));
  const float step_size = lr / bias_correction1;
  const float bias_correction2 = 1 - ::pow(h.beta2, static_cast<double>(step));
  const float bias_correction2_sqrt = sqrtf(bias_correction2);
  float* params = t.params[k];
  const float* grads = t.grads[k];
  float* exp_avgs = t.exp_avgs[k];
  float* exp_avg_sqs = t.exp_avg_sqs[k];
  Copy* copy = static_cast<Copy*>(t.copies[k]);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    float param = params[i];
    const float grad = grads[i];
    float exp_avg = exp_avgs[i];
    float exp_avg_sq = exp_avg_sqs[i];
    if (h.weight_decay != 0) param -= lr * h.weight_decay * param;
    exp_avg = h.beta1 * exp_avg + (1 - h.beta1) * grad;
    exp_avg_sq = h.beta2 * exp_avg_sq + (1 - h.beta2) * grad * grad;
    const float denom = (sqrtf(exp_avg_sq) / bias_correction2_sqrt) + h.eps;
    param -= step_size * exp_avg / denom;
    params[i] = param;
    exp_avgs[i] = exp_avg;
    exp_avg_sqs[i] = exp_avg_sq;
    if (copy != nullptr) copy[i] = from_float<Copy>(param);
  }
}

}  // namespace

KernelImage adamw_image() { return image_of(adamw_kernel<__nv_bfloat16>, 0); }

void adamw(const AdamWTensors& tensors, const AdamWHyper& hyper, void* stream) {
  if (tensors.count == 0) return;
  int64_t largest = 0;
  for (int k = 0; k < tensors.count; ++k) largest = std::max(largest, tensors.numels[k]);
  const int64_t blocks =
      std::clamp<int64_t>((largest + kThreads * 4 - 1) / (kThreads * 4), 1, kMaxBlocksPerTensor);
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(tensors.count));
  const auto s = static_cast<cudaStream_t>(stream);
  if (hyper.copy_dtype == Dtype::float16) {
    adamw_kernel<__half><<<grid, kThreads, 0, s>>>(tensors, hyper);
  } else {
    adamw_kernel<__nv_bfloat16><<<grid, kThreads, 0, s>>>(tensors, hyper);
  }
  check_launch("AdamW kernel launch");
}

}  // namespace ampt::kernels::cuda
