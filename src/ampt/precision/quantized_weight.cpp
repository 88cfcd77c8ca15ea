#include "ampt/precision/quantized_weight.h"

#include "ampt/config/enum_names.h"
#include "ampt/core/autocast_dtype.h"
#include "ampt/core/errors.h"
#include "ampt/kernels/fp8_gemm.h"
#include "ampt/kernels/fp8_quantize.h"
#include "ampt/kernels/fused_linear.h"
#include "ampt/kernels/kernel_support.h"

#include <fmt/format.h>
#include <torch/autograd.h>

#include <algorithm>

namespace ampt::precision {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// x [M, K] · Wᵀ for fp8 storage where the row-wise fp8 GEMM runs (Ada, Hopper: kernel_support's
// fp8_rowwise_gemm) and the GEMM is bf16's: x quantized row-wise to e4m3 and multiplied with the
// stored codes by _scaled_mm, each product dequantized there by x's row factor and the weight's
// row scale, so the forward never dequantizes the weight. Not otherwise (another device or
// dtype, or shapes that are not _scaled_mm's multiples of 16).
std::optional<torch::Tensor> fp8_codes_gemm(const torch::Tensor& x, const QuantizedWeight& weight,
                                            const std::optional<torch::Tensor>& bias) {
  if (weight.format() != config::BaseDtype::fp8 || x.scalar_type() != torch::kBFloat16) return {};
  const auto stored = weight.tensors();
  const auto& values = stored[0];  // [N, K], row-major
  const int64_t rows = x.numel() / std::max<int64_t>(1, x.size(-1));
  if (rows % 16 != 0 || values.size(0) % 16 != 0 || values.size(1) % 16 != 0 ||
      kernels::kernels_for(kernels::FusedPath::fp8_rowwise_gemm, x.device()) == nullptr) {
    return {};
  }
  const auto xq = kernels::cast_fp8_rowwise(x.reshape({rows, values.size(1)}),
                                            {c10::kFloat8_e4m3fn, 0});
  // _scaled_mm wants its second operand column-major: the codes' transpose is.
  auto y = kernels::fp8_gemm(xq.data, values.t(), xq.inverse, stored[1],
                             bias ? bias->to(torch::kBFloat16) : torch::Tensor(), torch::kBFloat16,
                             /*fast_accum=*/true);
  auto shape = x.sizes().vec();
  shape.back() = values.size(0);
  return y.view(shape);
}

// Saves the storage, not the dequantized weight: the backward dequantizes again.
struct QuantizedLinear : public torch::autograd::Function<QuantizedLinear> {
  // The bias is frozen with the weight: passed as a value, not as an input of the graph.
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const c10::intrusive_ptr<QuantizedWeight>& weight,
                               const std::optional<torch::Tensor>& bias) {
    const auto dtype = x.scalar_type();
    ctx->saved_data["weight"] = c10::IValue::make_capsule(weight);
    ctx->saved_data["dtype"] = static_cast<int64_t>(dtype);
    if (auto y = fp8_codes_gemm(x, *weight, bias)) return *y;
    // kernels::linear: at::linear, or in exact mode the batch-invariant GEMM.
    return kernels::linear(x, weight->dequantize(dtype), bias ? bias->to(dtype) : torch::Tensor());
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto weight = c10::static_intrusive_pointer_cast<QuantizedWeight>(
        ctx->saved_data["weight"].toCapsule());
    const auto dtype = static_cast<c10::ScalarType>(ctx->saved_data["dtype"].toInt());
    const auto& grad = grads[0];
    return {grad.to(dtype).matmul(weight->dequantize(dtype)), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

QuantizedWeight::QuantizedWeight(const torch::Tensor& weight, config::BaseDtype format,
                                 c10::Device device)
    : format_(format), shape_(weight.sizes().vec()) {
  switch (format) {
    case config::BaseDtype::nf4: {
      auto q = quantize_nf4(weight);
      q.codes = q.codes.to(device);
      q.absmax = q.absmax.to(device);
      q.absmax2 = q.absmax2.to(device);
      nf4_ = std::move(q);
      break;
    }
    case config::BaseDtype::int8:
    case config::BaseDtype::fp8: {
      const auto code = format == config::BaseDtype::int8 ? RowCode::int8 : RowCode::e4m3;
      auto q = quantize_rows(weight.reshape({-1, weight.size(-1)}), code);
      rows_ = RowScaled{q.values.to(device), q.scales.to(device)};
      break;
    }
    case config::BaseDtype::bf16: half_ = weight.detach().to(device, torch::kBFloat16); break;
    case config::BaseDtype::fp16: half_ = weight.detach().to(device, torch::kHalf); break;
    case config::BaseDtype::auto_select:
      throw std::logic_error("QuantizedWeight of base_dtype auto");
  }
}

torch::Tensor QuantizedWeight::dequantize(c10::ScalarType dtype) const {
  if (nf4_) return dequantize_nf4(*nf4_, dtype);
  if (rows_) return dequantize_rows(*rows_, dtype).view(shape_);
  return half_.to(dtype);
}

int64_t QuantizedWeight::bytes() const {
  if (nf4_) return nf4_->bytes();
  if (rows_) return rows_->bytes();
  return static_cast<int64_t>(half_.nbytes());
}

std::vector<torch::Tensor> QuantizedWeight::tensors() const {
  if (nf4_) return {nf4_->codes, nf4_->absmax, nf4_->absmax2};
  if (rows_) return {rows_->values, rows_->scales};
  return {half_};
}

torch::Tensor quantized_linear(const torch::Tensor& x,
                               const c10::intrusive_ptr<QuantizedWeight>& weight,
                               const torch::Tensor& bias) {
  return QuantizedLinear::apply(
      x.to(matmul_dtype(x)), weight,
      bias.defined() ? std::optional<torch::Tensor>(bias.detach()) : std::nullopt);
}

}  // namespace ampt::precision
