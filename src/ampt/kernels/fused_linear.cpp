#include "ampt/kernels/fused_linear.h"

#include "ampt/core/autocast_dtype.h"
#include "ampt/kernels/batch_invariant.h"
#include "ampt/kernels/fp32_gemm.h"
#include "ampt/kernels/gemm_epilogues.h"
#include "ampt/kernels/weight_copies.h"

#include <ATen/autocast_mode.h>
#include <torch/autograd.h>

namespace ampt::kernels {
namespace {

using OptionalTensor = std::optional<torch::Tensor>;

class FusedLinearFunction : public torch::autograd::Function<FusedLinearFunction> {
 public:
  // x [rows, in]: the 2-D addmm at::linear runs for a contiguous input with a bias (mm without
  // one). weight and bias are what autograd differentiates; where the half copies are given
  // the matmul reads those instead and the gradients go to weight and bias as float32
  // (half_param_grads). (Optional tensors: autograd's custom functions take no undefined one.)
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const OptionalTensor& bias_arg,
                               const OptionalTensor& weight_copy, const OptionalTensor& bias_copy,
                               bool epilogues, bool fp32_grad) {
    const bool copies = weight_copy.has_value();
    const auto bias = bias_arg.value_or(torch::Tensor());
    const auto& w = copies ? *weight_copy : weight;
    const auto b = copies ? bias_copy.value_or(torch::Tensor()) : bias;
    ctx->save_for_backward({x, w, weight, bias});
    ctx->saved_data["epilogues"] = epilogues;
    ctx->saved_data["copies"] = copies;
    ctx->saved_data["fp32_grad"] = fp32_grad;
    return b.defined() ? at::addmm(b, x, w.t()) : at::mm(x, w.t());
  }

  // As AddmmBackward0 forms each gradient (mm_mat1_backward; mm_mat2_backward for a transposed
  // weight; the bias's as a sum over rows), unless the epilogue takes both parameters' at once.
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &w = saved[1], &weight = saved[2], &bias = saved[3];
    const auto dy = grads[0].contiguous();
    const bool epilogues = ctx->saved_data["epilogues"].toBool();
    const auto params =
        ctx->saved_data["copies"].toBool()
            ? half_param_grads(dy, [&] { return x; }, weight, bias, ctx->needs_input_grad(1),
                               ctx->needs_input_grad(2), epilogues,
                               ctx->saved_data["fp32_grad"].toBool())
            : linear_param_grads(dy, [&] { return x; }, ctx->needs_input_grad(1),
                                 ctx->needs_input_grad(2), epilogues);
    return gradients({ctx->needs_input_grad(0) ? dy.mm(w) : torch::Tensor(), params.weight,
                      params.bias},
                     7);
  }
};

}  // namespace

std::optional<torch::Tensor> optional_tensor(const torch::Tensor& t) {
  return t.defined() ? std::optional<torch::Tensor>(t) : std::nullopt;
}

torch::Tensor autocast_linear_arg(const torch::Tensor& t) {
  const auto device = t.device().type();
  const auto dtype = autocast_dtype(device);
  return dtype ? at::autocast::cached_cast(*dtype, t, device) : t;
}

LinearCopies linear_copies(const torch::Tensor& weight, const torch::Tensor& bias) {
  const auto w = weight_copy(weight);
  if (!w.copy.defined()) return {};
  if (!bias.defined()) return {w.copy, {}, w.fp32_grad};
  const auto b = weight_copy(bias);
  // A bias without a copy of its own keeps autocast's cast, and with it the weight too.
  if (!b.copy.defined()) return {};
  return {w.copy, b.copy, w.fp32_grad};
}

TwoLinearArgs two_linear_args(const torch::Tensor& weight1, const torch::Tensor& bias1,
                              const torch::Tensor& weight2, const torch::Tensor& bias2) {
  const auto first = linear_copies(weight1, bias1);
  const auto second = linear_copies(weight2, bias2);
  if (first.weight.defined() && second.weight.defined() && first.fp32_grad == second.fp32_grad) {
    return {weight1,      bias1,       weight2,      bias2,           first.weight,
            first.bias,   second.weight, second.bias, first.fp32_grad};
  }
  const auto cast = autocast_linear_arg;  // the Linears' arguments as autocast would cast them
  return {cast(weight1), cast(bias1), cast(weight2), cast(bias2), {}, {}, {}, {}, false};
}

torch::Tensor addmm_as(at::IntArrayRef sizes, const torch::Tensor& bias, const torch::Tensor& mat,
                       const torch::Tensor& weight) {
  auto out = at::empty(sizes, mat.options());
  auto rows = out.view({mat.size(0), weight.size(0)});
  at::addmm_out(rows, bias, mat, weight.t());
  return out;
}

torch::autograd::variable_list gradients(std::initializer_list<torch::Tensor> grads,
                                         size_t inputs) {
  torch::autograd::variable_list out(grads);
  out.resize(inputs);
  return out;
}

torch::Tensor fused_linear(const torch::Tensor& x, const torch::Tensor& weight,
                           const torch::Tensor& bias, bool epilogues) {
  auto sizes = x.sizes().vec();
  sizes.back() = weight.size(0);
  const auto in = autocast_linear_arg(x).reshape({-1, x.size(-1)});
  if (const auto copies = linear_copies(weight, bias); copies.weight.defined()) {
    return FusedLinearFunction::apply(in, weight, optional_tensor(bias), copies.weight,
                                      optional_tensor(copies.bias), epilogues, copies.fp32_grad)
        .view(sizes);
  }
  const auto cast_bias = bias.defined() ? autocast_linear_arg(bias) : bias;
  return FusedLinearFunction::apply(in, autocast_linear_arg(weight), optional_tensor(cast_bias),
                                    OptionalTensor(), OptionalTensor(), epilogues, false)
      .view(sizes);
}

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight,
                     const torch::Tensor& bias) {
  if (batch_invariant()) return invariant_linear(x, weight, bias);
  if (linear_copies(weight, bias).weight.defined()) return fused_linear(x, weight, bias, false);
  return at::linear(x, weight, bias);
}

LinearParamGrads linear_param_grads(const torch::Tensor& d_out,
                                    const std::function<torch::Tensor()>& input, bool weight,
                                    bool bias, bool epilogues) {
  LinearParamGrads grads;
  if (weight) {
    // Made once: for the MLP's c_proj it is the GELU, recomputed.
    const auto in = input();
    if (const auto fused = bias && epilogues ? linear_weight_bias_grad(d_out, in) : std::nullopt) {
      return {fused->first, fused->second};
    }
    grads.weight = d_out.t().mm(in);
  }
  if (bias) grads.bias = d_out.sum(0);
  return grads;
}

LinearParamGrads half_param_grads(const torch::Tensor& d_out,
                                  const std::function<torch::Tensor()>& input,
                                  const torch::Tensor& weight, const torch::Tensor& bias,
                                  bool want_weight, bool want_bias, bool epilogues,
                                  bool fp32_grad) {
  if (!fp32_grad) {
    // Autocast's path: the half gradients its matmul makes, then their cast to the fp32
    // parameters (what ToCopyBackward0 did).
    auto grads = linear_param_grads(d_out, input, want_weight, want_bias, epilogues);
    if (grads.weight.defined()) grads.weight = grads.weight.to(weight.scalar_type());
    if (grads.bias.defined()) grads.bias = grads.bias.to(bias.scalar_type());
    return grads;
  }
  LinearParamGrads grads;
  if (want_weight) grads.weight = weight_grad_fp32(d_out, input(), weight);
  if (want_bias) grads.bias = bias_grad_fp32(d_out, bias);
  return grads;
}

}  // namespace ampt::kernels
