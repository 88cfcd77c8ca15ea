#include "ampt/kernels/gelu_mlp.h"

#include "ampt/kernels/gemm_epilogues.h"

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
                               const std::string& approximate, bool epilogues) {
    // cuBLASLt's GELU is the tanh approximation.
    epilogues = epilogues && approximate == "tanh";
    torch::Tensor pre, hidden;
    const auto fused = epilogues ? linear_gelu(x, fc_weight, fc_bias) : std::nullopt;
    if (fused) {
      pre = fused->first;
      hidden = fused->second;
    } else {
      pre = at::addmm(fc_bias, x, fc_weight.t());
      hidden = at::gelu(pre, approximate);
    }
    ctx->save_for_backward({x, pre, fc_weight, proj_weight});
    ctx->saved_data["approximate"] = approximate;
    ctx->saved_data["epilogues"] = epilogues;
    return at::addmm(proj_bias, hidden, proj_weight.t());
  }

  // Without the epilogues, each gradient as AddmmBackward0 and GeluBackward0 form it
  // (mm_mat1_backward, and mm_mat2_backward for a transposed weight), so the values are the
  // unfused ones.
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &pre = saved[1], &fc_weight = saved[2], &proj_weight = saved[3];
    const auto approximate = ctx->saved_data["approximate"].toStringRef();
    const bool epilogues = ctx->saved_data["epilogues"].toBool();
    const auto dy = grads[0].contiguous();
    torch::Tensor dx, d_fc_weight, d_fc_bias, d_proj_weight, d_proj_bias;
    // A Linear's weight and bias gradients from one GEMM where both are wanted.
    const auto weight_bias = [&](const torch::Tensor& d_out, const auto& input, int64_t w,
                                 torch::Tensor& d_weight, torch::Tensor& d_bias) {
      const bool both = epilogues && ctx->needs_input_grad(w) && ctx->needs_input_grad(w + 1);
      if (const auto fused = both ? linear_weight_bias_grad(d_out, input()) : std::nullopt) {
        d_weight = fused->first;
        d_bias = fused->second;
        return;
      }
      if (ctx->needs_input_grad(w)) d_weight = d_out.t().mm(input());
      if (ctx->needs_input_grad(w + 1)) d_bias = d_out.sum(0);
    };
    weight_bias(dy, [&] { return at::gelu(pre, approximate); }, 3, d_proj_weight, d_proj_bias);
    auto d_pre = epilogues ? linear_input_grad_dgelu(dy, proj_weight, pre) : std::nullopt;
    if (!d_pre) d_pre = at::gelu_backward(dy.mm(proj_weight), pre, approximate);
    weight_bias(*d_pre, [&] { return x; }, 1, d_fc_weight, d_fc_bias);
    if (ctx->needs_input_grad(0)) dx = d_pre->mm(fc_weight);
    return {dx, d_fc_weight, d_fc_bias, d_proj_weight, d_proj_bias, torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

torch::Tensor gelu_mlp(const torch::Tensor& x, const GeluMlpWeights& weights,
                       const std::string& approximate, bool epilogues) {
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
                                cast(weights.proj_bias), approximate, epilogues)
      .view(sizes);
}

}  // namespace ampt::kernels
