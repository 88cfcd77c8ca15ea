#include "ampt/kernels/gelu_mlp.h"

#include "ampt/kernels/fused_linear.h"
#include "ampt/kernels/gemm_epilogues.h"

#include <torch/autograd.h>

namespace ampt::kernels {
namespace {

class GeluMlpFunction : public torch::autograd::Function<GeluMlpFunction> {
 public:
  // input [..., width] and the weights in one dtype; the Linears as at::linear runs them
  // (addmm). With the half copies given (all four), the matmuls read them and the four fp32
  // weights get fp32 gradients (fused_linear.h's half_param_grads).
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& input,
                               const torch::Tensor& fc_weight, const torch::Tensor& fc_bias,
                               const torch::Tensor& proj_weight, const torch::Tensor& proj_bias,
                               const std::optional<torch::Tensor>& fc_weight_copy,
                               const std::optional<torch::Tensor>& fc_bias_copy,
                               const std::optional<torch::Tensor>& proj_weight_copy,
                               const std::optional<torch::Tensor>& proj_bias_copy,
                               const std::string& approximate, bool epilogues, bool fp32_grad,
                               bool keep_output) {
    const auto x = input.reshape({-1, input.size(-1)});
    const bool copies = fc_weight_copy.has_value();
    const auto& fc_w = copies ? *fc_weight_copy : fc_weight;
    const auto& fc_b = copies ? *fc_bias_copy : fc_bias;
    const auto& proj_w = copies ? *proj_weight_copy : proj_weight;
    const auto& proj_b = copies ? *proj_bias_copy : proj_bias;
    // cuBLASLt's GELU is the tanh approximation.
    epilogues = epilogues && approximate == "tanh";
    torch::Tensor pre, hidden;
    const auto fused = epilogues ? linear_gelu(x, fc_w, fc_b) : std::nullopt;
    if (fused) {
      pre = fused->first;
      hidden = fused->second;
    } else {
      pre = at::addmm(fc_b, x, fc_w.t());
      hidden = at::gelu(pre, approximate);
    }
    ctx->save_for_backward({x, pre, fc_w, proj_w, fc_weight, fc_bias, proj_weight, proj_bias,
                            keep_output ? hidden : torch::Tensor()});
    ctx->saved_data["approximate"] = approximate;
    ctx->saved_data["epilogues"] = epilogues;
    ctx->saved_data["copies"] = copies;
    ctx->saved_data["fp32_grad"] = fp32_grad;
    ctx->saved_data["sizes"] = input.sizes().vec();
    auto sizes = input.sizes().vec();
    sizes.back() = proj_w.size(0);
    return addmm_as(sizes, proj_b, hidden, proj_w);
  }

  // Without the epilogues, each gradient as AddmmBackward0 and GeluBackward0 form it
  // (mm_mat1_backward, and mm_mat2_backward for a transposed weight), so the values are the
  // unfused ones.
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &pre = saved[1], &fc_w = saved[2], &proj_w = saved[3];
    const auto approximate = ctx->saved_data["approximate"].toStringRef();
    const bool epilogues = ctx->saved_data["epilogues"].toBool();
    const bool copies = ctx->saved_data["copies"].toBool();
    const bool fp32_grad = ctx->saved_data["fp32_grad"].toBool();
    const auto dy = grads[0].reshape({-1, grads[0].size(-1)}).contiguous();
    const auto need = [&](int i) { return ctx->needs_input_grad(i); };
    const auto param_grads = [&](const torch::Tensor& d_out,
                                 const std::function<torch::Tensor()>& input, int w, int b) {
      return copies ? half_param_grads(d_out, input, saved[4 + w - 1], saved[4 + b - 1], need(w),
                                       need(b), epilogues, fp32_grad)
                    : linear_param_grads(d_out, input, need(w), need(b), epilogues);
    };
    const auto& kept = saved[8];
    const auto proj =
        param_grads(dy, [&] { return kept.defined() ? kept : at::gelu(pre, approximate); }, 3, 4);
    auto d_pre = epilogues ? linear_input_grad_dgelu(dy, proj_w, pre) : std::nullopt;
    if (!d_pre) d_pre = at::gelu_backward(dy.mm(proj_w), pre, approximate);
    const auto fc = param_grads(*d_pre, [&] { return x; }, 1, 2);
    const auto sizes = ctx->saved_data["sizes"].toIntVector();
    return gradients({need(0) ? d_pre->mm(fc_w).view(sizes) : torch::Tensor(), fc.weight, fc.bias,
                      proj.weight, proj.bias},
                     13);
  }
};

}  // namespace

bool gelu_mlp_keeps_output(c10::DeviceType device) { return device == c10::kCPU; }

torch::Tensor gelu_mlp(const torch::Tensor& x, const GeluMlpWeights& weights,
                       const std::string& approximate, bool epilogues, GeluOutput output) {
  const auto in = autocast_linear_arg(x);
  const auto a = two_linear_args(weights.fc_weight, weights.fc_bias, weights.proj_weight,
                                 weights.proj_bias);
  return GeluMlpFunction::apply(in, a.weight1, a.bias1, a.weight2, a.bias2, a.copy_weight1,
                                a.copy_bias1, a.copy_weight2, a.copy_bias2, approximate, epilogues,
                                a.fp32_grad,
                                output == GeluOutput::by_device
                                    ? gelu_mlp_keeps_output(x.device().type())
                                    : output == GeluOutput::keep);
}

}  // namespace ampt::kernels
