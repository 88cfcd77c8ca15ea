#include "ampt/kernels/gelu_mlp.h"

#include <ATen/autocast_mode.h>
#include <torch/autograd.h>

namespace ampt::kernels {
namespace {

class GeluMlpFunction : public torch::autograd::Function<GeluMlpFunction> {
 public:
  // x [rows, width] and the weights in one dtype; the Linears as at::linear runs them (addmm).
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& fc_weight, const torch::Tensor& fc_bias,
                               const torch::Tensor& proj_weight, const torch::Tensor& proj_bias,
                               const std::string& approximate) {
    const auto pre = at::addmm(fc_bias, x, fc_weight.t());
    ctx->save_for_backward({x, pre, fc_weight, proj_weight});
    ctx->saved_data["approximate"] = approximate;
    return at::addmm(proj_bias, at::gelu(pre, approximate), proj_weight.t());
  }

  // Each gradient as AddmmBackward0 and GeluBackward0 form it (mm_mat1_backward, and
  // mm_mat2_backward for a transposed weight), so the values are the unfused ones.
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &pre = saved[1], &fc_weight = saved[2], &proj_weight = saved[3];
    const auto approximate = ctx->saved_data["approximate"].toStringRef();
    const auto& dy = grads[0];
    torch::Tensor dx, d_fc_weight, d_fc_bias, d_proj_weight, d_proj_bias;
    if (ctx->needs_input_grad(3)) d_proj_weight = dy.t().mm(at::gelu(pre, approximate));
    if (ctx->needs_input_grad(4)) d_proj_bias = dy.sum(0);
    const auto d_pre = at::gelu_backward(dy.mm(proj_weight), pre, approximate);
    if (ctx->needs_input_grad(1)) d_fc_weight = d_pre.t().mm(x);
    if (ctx->needs_input_grad(2)) d_fc_bias = d_pre.sum(0);
    if (ctx->needs_input_grad(0)) dx = d_pre.mm(fc_weight);
    return {dx, d_fc_weight, d_fc_bias, d_proj_weight, d_proj_bias, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor gelu_mlp(const torch::Tensor& x, const GeluMlpWeights& weights,
                       const std::string& approximate) {
  const auto device = x.device().type();
  const bool autocast = at::autocast::is_autocast_enabled(device);
  const auto dtype = at::autocast::get_autocast_dtype(device);
  // What autocast does to a Linear's arguments, weight cache included: the operation sees them
  // already cast, so autocast leaves the addmm calls inside alone.
  const auto cast = [&](const torch::Tensor& t) {
    return autocast ? at::autocast::cached_cast(dtype, t, device) : t;
  };
  auto sizes = x.sizes().vec();
  sizes.back() = weights.proj_weight.size(0);
  return GeluMlpFunction::apply(cast(x).reshape({-1, x.size(-1)}), cast(weights.fc_weight),
                                cast(weights.fc_bias), cast(weights.proj_weight),
                                cast(weights.proj_bias), approximate)
      .view(sizes);
}

}  // namespace ampt::kernels
