// The one Linear layer every transformer block runs its matmuls through (as llama.cpp's
// build_lora_mm): x·Wᵀ + b by the route the layer's state picks, which is attached from outside
// by the layer's name, never wired into a model:
// - a quantized frozen weight (quantize_base, --base_dtype): dequantized where the GEMM runs
//   (precision/quantized_weight.h);
// - fp8 (attach_fp8): its own scaling state, the GEMMs in e4m3/e5m2 (precision/fp8_linear.h);
// - an fp32 island (precision/precision_islands.h): autocast off, fp32 weights;
// - otherwise kernels::linear (over the weight's half copy where it has one), or with GEMM
//   epilogues kernels::fused_linear, whose backward takes the weight's and bias's gradients from
//   one GEMM;
// and a LoRA adapter (lora.h, attach_lora) adds its update to whichever of these ran.
#pragma once

#include "ampt/precision/fp8_layers.h"
#include "ampt/precision/fp8_linear.h"
#include "ampt/models/layer_inventory.h"
#include "ampt/models/quantizable.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <cstdint>
#include <map>
#include <string>

namespace ampt::models {

class LinearImpl : public torch::nn::LinearImpl, public QuantizableWeights {
 public:
  LinearImpl(int64_t in, int64_t out, bool bias);

  // x [..., in] → [..., out]. `epilogues`: the fused GEMM where nothing else is attached and
  // the layer is no fp32 island. A recomputation (activation checkpointing) leaves fp8 scales
  // alone.
  torch::Tensor forward(const torch::Tensor& x, bool epilogues = false);

  // Whether the layer runs as it is: no fp8, no adapter, no fp32 island. Operations that fuse
  // a layer with its neighbours (GPT's whole attention, its GELU MLP) take only plain layers.
  bool plain() const;
  // The fp8 state attach_fp8 gave it (none: the layer runs in the autocast dtype).
  const c10::intrusive_ptr<precision::Fp8Linear>& fp8() const { return fp8_; }
  void set_fp8(c10::intrusive_ptr<precision::Fp8Linear> state) { fp8_ = std::move(state); }
  // Its one quantizable weight, "weight" (quantizable.h).
  const std::vector<std::string>& quantizable_names() const override;
  torch::Tensor& quantizable_parameter(size_t) override { return weight; }
  // The quantized storage quantize_base gave its frozen weight (none: the weight itself).
  const c10::intrusive_ptr<precision::QuantizedWeight>& quantized() const {
    return QuantizableWeights::quantized(0);
  }

 private:
  // The base's GEMM, without the adapter.
  torch::Tensor base(const torch::Tensor& x, bool epilogues, bool island);

  c10::intrusive_ptr<precision::Fp8Linear> fp8_;
};
TORCH_MODULE(Linear);

// Registers in `owner` the Linear of `block` (one block's layer inventory entries,
// layer_inventory.h) that has `role`, under the last part of its inventory name and with its
// shape and bias: a family names and sizes its block Linears once, in its inventory, and its
// modules are built from that.
Linear register_declared(torch::nn::Module& owner, const std::vector<LinearLayer>& block,
                         LinearRole role);

// While one lives on this thread, each Linear (and expert group, moe.h) made takes placeholder
// weights as soon as its constructor has initialized them (accelerate's init_empty_weights, one
// layer at a time): a LoRA base whose values a checkpoint gives never holds its block weights in
// fp32.
class DeferredWeights {
 public:
  explicit DeferredWeights(bool active);
  ~DeferredWeights();
  DeferredWeights(const DeferredWeights&) = delete;
  DeferredWeights& operator=(const DeferredWeights&) = delete;

 private:
  bool previous_;
};

// Makes `weight` (just initialized) a placeholder of its shape while a DeferredWeights lives on
// this thread: each Linear's and expert group's constructor calls it last.
void defer_if_asked(torch::Tensor& weight);

// normal_(weight, 0, std) as a model initializes its weights; a placeholder's draws go to a
// scratch tensor that is dropped, so that the random stream stays what it would be.
void init_normal(const torch::Tensor& weight, double std);

// Gives each seam Linear under `root` whose dotted name `selected` names a fresh fp8 state of
// `recipe`, and takes it from the others.
void attach_fp8(torch::nn::Module& root, const precision::Fp8Recipe& recipe,
                const precision::Fp8Selected& selected);

}  // namespace ampt::models
