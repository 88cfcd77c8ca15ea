#include "ampt/kernels/gelu_mlp.h"

#include "ampt/kernels/fused_linear.h"
#include "ampt/kernels/gemm_epilogues.h"

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
    const auto need = [&](int i) { return ctx->needs_input_grad(i); };
    const auto proj = linear_param_grads(
        dy, [&] { return at::gelu(pre, approximate); }, need(3), need(4), epilogues);
    auto d_pre = epilogues ? linear_input_grad_dgelu(dy, proj_weight, pre) : std::nullopt;
    if (!d_pre) d_pre = at::gelu_backward(dy.mm(proj_weight), pre, approximate);
    const auto fc = linear_param_grads(*d_pre, [&] { return x; }, need(1), need(2), epilogues);
    return {need(0) ? d_pre->mm(fc_weight) : torch::Tensor(),
            fc.weight,
            fc.bias,
            proj.weight,
            proj.bias,
            torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

torch::Tensor gelu_mlp(const torch::Tensor& x, const GeluMlpWeights& weights,
                       const std::string& approximate, bool epilogues) {
  const auto cast = autocast_linear_arg;  // the Linears' arguments as autocast would cast them
  auto sizes = x.sizes().vec();
  sizes.back() = weights.proj_weight.size(0);
  return GeluMlpFunction::apply(cast(x).reshape({-1, x.size(-1)}), cast(weights.fc_weight),
                                cast(weights.fc_bias), cast(weights.proj_weight),
                                cast(weights.proj_bias), approximate, epilogues)
      .view(sizes);
}

}  // namespace ampt::kernels
