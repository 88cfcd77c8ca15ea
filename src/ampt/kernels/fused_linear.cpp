#include "ampt/kernels/fused_linear.h"

#include "ampt/kernels/gemm_epilogues.h"

#include <ATen/autocast_mode.h>
#include <torch/autograd.h>

namespace ampt::kernels {
namespace {

class FusedLinearFunction : public torch::autograd::Function<FusedLinearFunction> {
 public:
  // x [rows, in]: the 2-D addmm at::linear runs for a contiguous input with a bias.
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const torch::Tensor& bias,
                               bool epilogues) {
    ctx->save_for_backward({x, weight});
    ctx->saved_data["epilogues"] = epilogues;
    return at::addmm(bias, x, weight.t());
  }

  // As AddmmBackward0 forms each gradient (mm_mat1_backward; mm_mat2_backward for a transposed
  // weight; the bias's as a sum over rows), unless the epilogue takes both parameters' at once.
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &weight = saved[1];
    const auto dy = grads[0].contiguous();
    const auto params =
        linear_param_grads(dy, [&] { return x; }, ctx->needs_input_grad(1),
                           ctx->needs_input_grad(2), ctx->saved_data["epilogues"].toBool());
    return {ctx->needs_input_grad(0) ? dy.mm(weight) : torch::Tensor(), params.weight,
            params.bias, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor autocast_linear_arg(const torch::Tensor& t) {
  const auto device = t.device().type();
  if (!at::autocast::is_autocast_enabled(device)) return t;
  return at::autocast::cached_cast(at::autocast::get_autocast_dtype(device), t, device);
}

torch::Tensor fused_linear(const torch::Tensor& x, const torch::Tensor& weight,
                           const torch::Tensor& bias, bool epilogues) {
  auto sizes = x.sizes().vec();
  sizes.back() = weight.size(0);
  return FusedLinearFunction::apply(autocast_linear_arg(x).reshape({-1, x.size(-1)}),
                                    autocast_linear_arg(weight), autocast_linear_arg(bias),
                                    epilogues)
      .view(sizes);
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

}  // namespace ampt::kernels
