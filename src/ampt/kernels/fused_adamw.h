// One AdamW step (torch.optim.AdamW's arithmetic, decoupled weight decay) over float32
// parameters that also writes each stepped parameter's half-precision copy where it has one: the
// weights an O1 forward computes with come out of the optimizer's own pass instead of a cast in
// every forward (precision/half_weights.h). On a GPU one kernel does both (cuda/adamw.cu, where
// the AdamW path runs: kernel_support.h); elsewhere ATen's _fused_adamw_ steps and the copies are
// written after it, inside the same operation. Skipped on the device when found_inf is 1.
#pragma once

#include <torch/types.h>

#include <vector>

namespace ampt::kernels {

struct AdamWSettings {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double weight_decay = 0.0;
  double eps = 1e-8;
};

// All lists parallel; params, grads and both moments float32 of one shape each; steps 0-dim
// float32 counts that already include this step; copies bfloat16 or float16 of the parameter's
// shape, or undefined where a parameter has none (all of one half dtype). `lr` a number, or a
// 0-dim float32 tensor on the parameters' device (read there: a CUDA graph replays it).
struct AdamWTensorLists {
  std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps, copies;
};
void fused_adamw(const AdamWTensorLists& lists, const AdamWSettings& settings, double lr,
                 const torch::Tensor& found_inf);
void fused_adamw(const AdamWTensorLists& lists, const AdamWSettings& settings,
                 const torch::Tensor& lr, const torch::Tensor& found_inf);

// The same step as ATen computes it (_fused_adamw_, then the copies), whatever the device: what
// the kernel must agree with.
void fused_adamw_reference(const AdamWTensorLists& lists, const AdamWSettings& settings,
                           double lr, const torch::Tensor& found_inf);

}  // namespace ampt::kernels
