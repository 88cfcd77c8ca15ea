#include "ampt/kernels/fused_adamw.h"

#include "ampt/kernels/cuda_dtype.h"
#include "ampt/kernels/kernel_support.h"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/_foreach_copy.h>
#include <ATen/ops/_fused_adamw.h>
#include <ATen/record_function.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <optional>
#include <type_traits>

namespace ampt::kernels {
namespace {

// The copies to write and the parameters they come from, in ATen's path.
void write_copies(const AdamWTensorLists& lists) {
  std::vector<torch::Tensor> copies, params;
  for (size_t i = 0; i < lists.copies.size(); ++i) {
    if (!lists.copies[i].defined()) continue;
    copies.push_back(lists.copies[i]);
    params.push_back(lists.params[i]);
  }
  if (copies.empty()) return;
  const at::NoGradGuard no_grad;  // the weights are leaves that train: nothing to record
  at::_foreach_copy_(copies, params);
}

template <class Lr>
void aten_step(const AdamWTensorLists& lists, const AdamWSettings& s, const Lr& lr,
               const torch::Tensor& found_inf) {
  at::_fused_adamw_(lists.params, lists.grads, lists.exp_avgs, lists.exp_avg_sqs, {}, lists.steps,
                    lr, s.beta1, s.beta2, s.weight_decay, s.eps, /*amsgrad=*/false,
                    /*maximize=*/false, /*grad_scale=*/std::nullopt, found_inf);
  // A skipped step leaves the parameters as they were, so their copies need no decision.
  write_copies(lists);
}

// The kernel's launches, kAdamWTensors tensors at a time.
void kernel_step(const KernelBackend& kernels, const AdamWTensorLists& lists,
                 const AdamWSettings& s, double lr, const torch::Tensor& lr_tensor,
                 const torch::Tensor& found_inf) {
  const auto& device = lists.params.front().device();
  const c10::DeviceGuard guard(device);
  abi::AdamWHyper hyper;
  hyper.lr = lr;
  hyper.lr_tensor = lr_tensor.defined() ? lr_tensor.data_ptr<float>() : nullptr;
  hyper.beta1 = s.beta1;
  hyper.beta2 = s.beta2;
  hyper.weight_decay = s.weight_decay;
  hyper.eps = s.eps;
  hyper.found_inf = found_inf.defined() ? found_inf.data_ptr<float>() : nullptr;
  for (const auto& copy : lists.copies) {
    if (copy.defined()) hyper.copy_dtype = cuda_dtype(copy.scalar_type());
  }
  abi::AdamWTensors batch;
  const auto launch = [&] {
    kernels.adamw(batch, hyper, kernels.stream(device));
    batch = {};
  };
  for (size_t i = 0; i < lists.params.size(); ++i) {
    const int k = batch.count++;
    batch.params[k] = lists.params[i].data_ptr<float>();
    batch.grads[k] = lists.grads[i].data_ptr<float>();
    batch.exp_avgs[k] = lists.exp_avgs[i].data_ptr<float>();
    batch.exp_avg_sqs[k] = lists.exp_avg_sqs[i].data_ptr<float>();
    batch.steps[k] = lists.steps[i].data_ptr<float>();
    batch.copies[k] = lists.copies[i].defined() ? lists.copies[i].data_ptr() : nullptr;
    batch.numels[k] = lists.params[i].numel();
    if (batch.count == abi::kAdamWTensors) launch();
  }
  if (batch.count > 0) launch();
}

// What the kernel takes: contiguous float32 tensors of matching sizes on one device, a float32
// found_inf, copies of one half dtype, lr (when a tensor) float32.
bool kernel_takes(const AdamWTensorLists& lists, const torch::Tensor& lr_tensor,
                  const torch::Tensor& found_inf) {
  if (lists.params.empty()) return false;
  const auto device = lists.params.front().device();
  const auto fits = [&](const torch::Tensor& t, const torch::Tensor& like) {
    return t.device() == device && t.scalar_type() == c10::kFloat && t.is_contiguous() &&
           t.sizes() == like.sizes();
  };
  std::optional<c10::ScalarType> copy_dtype;
  for (size_t i = 0; i < lists.params.size(); ++i) {
    const auto& p = lists.params[i];
    if (!fits(p, p) || !fits(lists.grads[i], p) || !fits(lists.exp_avgs[i], p) ||
        !fits(lists.exp_avg_sqs[i], p) || lists.steps[i].device() != device ||
        lists.steps[i].scalar_type() != c10::kFloat) {
      return false;
    }
    const auto& copy = lists.copies[i];
    if (!copy.defined()) continue;
    if (copy.device() != device || !copy.is_contiguous() || copy.sizes() != p.sizes() ||
        (copy.scalar_type() != c10::kBFloat16 && copy.scalar_type() != c10::kHalf) ||
        (copy_dtype && *copy_dtype != copy.scalar_type())) {
      return false;
    }
    copy_dtype = copy.scalar_type();
  }
  const auto scalar_fits = [&](const torch::Tensor& t) {
    return !t.defined() || (t.device() == device && t.scalar_type() == c10::kFloat);
  };
  return scalar_fits(lr_tensor) && scalar_fits(found_inf) &&
         kernels_for(FusedPath::adamw, device) != nullptr;
}

template <class Lr>
void step(const AdamWTensorLists& lists, const AdamWSettings& settings, const Lr& lr,
          const torch::Tensor& found_inf) {
  if (lists.params.empty()) return;
  const auto has_copy = [](const torch::Tensor& copy) { return copy.defined(); };
  if (std::ranges::none_of(lists.copies, has_copy)) {
    // Nothing to write besides ATen's own step: its kernel, as torch.optim.AdamW(fused=True).
    at::_fused_adamw_(lists.params, lists.grads, lists.exp_avgs, lists.exp_avg_sqs, {},
                      lists.steps, lr, settings.beta1, settings.beta2, settings.weight_decay,
                      settings.eps, /*amsgrad=*/false, /*maximize=*/false,
                      /*grad_scale=*/std::nullopt, found_inf);
    return;
  }
  // One operation of ampt's own (the step census counts it as one, as a GPU runs it).
  RECORD_FUNCTION("ampt::fused_adamw", std::vector<c10::IValue>());
  torch::Tensor lr_tensor;
  double lr_value = 0.0;
  if constexpr (std::is_same_v<Lr, double>) {
    lr_value = lr;
  } else {
    lr_tensor = lr;
  }
  if (kernel_takes(lists, lr_tensor, found_inf)) {
    kernel_step(*kernels_for(FusedPath::adamw, lists.params.front().device()), lists, settings,
                lr_value, lr_tensor, found_inf);
    return;
  }
  aten_step(lists, settings, lr, found_inf);
}

}  // namespace

void fused_adamw(const AdamWTensorLists& lists, const AdamWSettings& settings, double lr,
                 const torch::Tensor& found_inf) {
  step(lists, settings, lr, found_inf);
}

void fused_adamw(const AdamWTensorLists& lists, const AdamWSettings& settings,
                 const torch::Tensor& lr, const torch::Tensor& found_inf) {
  step(lists, settings, lr, found_inf);
}

void fused_adamw_reference(const AdamWTensorLists& lists, const AdamWSettings& settings,
                           double lr, const torch::Tensor& found_inf) {
  aten_step(lists, settings, lr, found_inf);
}

}  // namespace ampt::kernels
