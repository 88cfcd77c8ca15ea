#include "ampt/train/tuning.h"

#include "ampt/models/model_family.h"

#include <ATen/Context.h>
#include <torch/nn/module.h>

namespace ampt::train {

std::string apply_tf32(bool allow, const c10::Device& device) {
  at::globalContext().setAllowTF32CuBLAS(allow);
  at::globalContext().setAllowTF32CuDNN(allow);
  if (!device.is_cuda()) return allow ? "TF32: requested, no effect on " + device.str() : "";
  return allow ? "TF32: fp32 matmuls and convolutions on TF32 tensor cores (Ampere and newer)"
               : "TF32: off, fp32 matmuls and convolutions in IEEE fp32";
}

bool channels_last_applies(const config::Config& config) {
  return config.channels_last && models::family_of(config).channels_last;
}

void to_channels_last(models::Model& model) {
  for (auto& p : model.module->parameters()) {
    if (p.dim() == 4) p.set_data(p.data().contiguous(torch::MemoryFormat::ChannelsLast));
  }
  model.forward = [forward = model.forward](const torch::Tensor& x) {
    return forward(x.contiguous(torch::MemoryFormat::ChannelsLast));
  };
}

}  // namespace ampt::train
