// O2's fp32 master weights: the model holds half-precision weights for the forward and backward
// passes, the optimizer steps fp32 copies, and the half weights are refreshed from them.
#pragma once

#include "ampt/core/named_tensors.h"

#include <torch/nn/module.h>
#include <torch/types.h>

#include <functional>
#include <string>
#include <vector>

namespace ampt::precision {

// Apex amp O2's scheme (fp32_from_fp16 masters, fp32_from_fp32 parameters used as they are)
// without host synchronisations: every copy is a device-side foreach op.
//
// Disabled (O0/O1), it is transparent: the masters are the parameters and their gradients the
// model's. Enabled, each parameter that `keep_fp32` does not claim is stored in the weight dtype
// and has a separate fp32 master; the parameters `keep_fp32` claims (norm layers and
// keep_fp32_modules) stay fp32 and are their own masters.
//
// Frozen parameters (requires_grad false: a LoRA base) are no part of it: no master, no
// gradient, no optimizer state; store_frozen holds them in the compute dtype.
class MasterWeights {
 public:
  MasterWeights(torch::nn::Module& module, bool enabled,
                const std::function<bool(const std::string& parameter)>& keep_fp32);

  bool enabled() const { return enabled_; }

  // What the optimizer steps, named as the model's parameters: all fp32.
  NamedTensors masters() const;
  // The frozen parameters, as the model holds them.
  const NamedTensors& frozen() const { return frozen_; }
  // Stores the frozen floating parameters that `keep_fp32` does not claim in `dtype` (a half
  // dtype: a frozen base needs no fp32 copy, as it never steps).
  void store_frozen(c10::ScalarType dtype);

  // Stores the non-fp32 parameters in `dtype` from the masters (O2 only; no-op when disabled).
  // fp32 makes the parameters views of the masters' storage (one copy of the weights); a half
  // dtype re-casts them, and their old gradients are dropped (they were in the previous dtype).
  void set_dtype(c10::ScalarType dtype);
  c10::ScalarType dtype() const { return dtype_; }

  // The gradients to unscale, clip and step with, one per master that has a gradient: the
  // model's own when disabled; enabled, each half gradient copied into a fresh fp32 gradient of
  // its master (where unscaling then happens in fp32, so small values survive) and then
  // released, as the fp32 gradients are by refresh_model: between steps O2 holds no gradients
  // of the half parameters at all.
  std::vector<torch::Tensor> master_grads();

  // Copies the masters into the half parameters (after every optimizer step, and after a
  // checkpoint's masters were loaded) and releases the masters' gradients. A skipped step left the masters unchanged, so the copy
  // is harmless then and needs no host-side decision.
  void refresh_model();

  // ZeRO keeps the fp32 masters from here on, sharded across ranks, and refreshes the half
  // parameters itself: drops the full copies (O2; nothing to drop below it). After that only
  // enabled(), dtype() and a set_dtype to the current dtype may be called; the rest throw
  // std::logic_error.
  void release_masters();

 private:
  void require_masters(const char* what) const;

  struct Entry {
    std::string name;
    torch::Tensor param;   // the model's parameter
    torch::Tensor master;  // fp32; the parameter itself when it is kept in fp32
    bool separate = false;  // has its own master (not kept fp32)
  };

  std::function<bool(const std::string&)> keep_fp32_;
  NamedTensors frozen_;
  bool enabled_;
  bool released_ = false;
  c10::ScalarType dtype_ = c10::kFloat;
  std::vector<Entry> entries_;
};

}  // namespace ampt::precision
