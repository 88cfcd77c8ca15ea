// O1's half working weights: instead of autocast casting each fp32 weight to the half dtype in
// every forward (and converting its half gradient back in every backward), the weights the
// matmuls read keep a half copy (kernels/weight_copies.h) that the optimizer step writes in the
// pass that updates the fp32 weight (kernels/fused_adamw.h), and their gradients come out of
// fp32-output GEMMs (kernels/fp32_gemm.h). bf16(w) is the same value whoever rounds it, so the
// forward computes exactly what autocast's casts gave. Apex's O2 and Megatron keep half weights
// too, but as the model's own parameters; here the model, its fp32 weights, the optimizer and
// checkpoints stay O1's, and only the copies are added.
#pragma once

#include <c10/core/ScalarType.h>
#include <torch/types.h>

#include <vector>

namespace ampt::precision {

class HalfWeights {
 public:
  // `parameters`: the trainable ones, which may have copies once set_dtype names a half dtype.
  // `fp32_grad`: their Linears take the weight gradients in fp32 from the GEMM (else autocast's
  // half gradients, cast: the same values as without copies).
  HalfWeights(std::vector<torch::Tensor> parameters, bool fp32_grad);
  ~HalfWeights();
  HalfWeights(const HalfWeights&) = delete;
  HalfWeights& operator=(const HalfWeights&) = delete;

  // Copies in `dtype` (a half dtype) from now on, or none (kFloat): each precision stage's
  // compute dtype under O1 with autocast, kFloat otherwise. Copies of another dtype are dropped
  // and made again, from the fp32 weights, when a matmul reads them.
  void set_dtype(c10::ScalarType dtype);
  c10::ScalarType dtype() const { return dtype_; }

  // Rewrites every copy made so far from its fp32 weight: after the weights changed other than
  // by the fused AdamW step (ZeRO's all-gather of the stepped shards, an SGD step).
  void refresh();

 private:
  std::vector<torch::Tensor> parameters_;
  bool fp32_grad_;
  c10::ScalarType dtype_ = c10::kFloat;
};

}  // namespace ampt::precision
