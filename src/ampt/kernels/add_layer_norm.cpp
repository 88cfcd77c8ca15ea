#include "ampt/kernels/add_layer_norm.h"

#include "ampt/core/autocast_dtype.h"
#include "ampt/kernels/kernel_support.h"

#include <c10/core/DeviceGuard.h>
#include <torch/autograd.h>

#include <optional>

namespace ampt::kernels {
namespace {

using abi::AddLayerNormLayout;

// The backend the kernels launch through: the one kernels_for found when the path was chosen.
const KernelBackend& add_layer_norm_backend(const torch::Tensor& t) {
  return *kernels_for(FusedPath::add_layer_norm, t.device());
}

// The dtype the next matmul reads: autocast's where it is on, else layer_norm's own result.
c10::ScalarType normed_dtype(const torch::Tensor& residual, const torch::Tensor& branch) {
  return autocast_dtype(residual.device().type()).value_or(at::result_type(residual, branch));
}

std::optional<AddLayerNormLayout> kernel_layout(c10::ScalarType stream, c10::ScalarType branch,
                                                c10::ScalarType normed) {
  using c10::kBFloat16, c10::kFloat, c10::kHalf;
  if (stream == kFloat && branch == kFloat && normed == kFloat) return AddLayerNormLayout::f32_f32_f32;
  if (stream == kFloat && branch == kBFloat16 && normed == kBFloat16) {
    return AddLayerNormLayout::f32_bf16_bf16;
  }
  if (stream == kFloat && branch == kHalf && normed == kHalf) return AddLayerNormLayout::f32_f16_f16;
  if (stream == kBFloat16 && branch == kBFloat16 && normed == kBFloat16) {
    return AddLayerNormLayout::bf16_bf16_bf16;
  }
  if (stream == kHalf && branch == kHalf && normed == kHalf) return AddLayerNormLayout::f16_f16_f16;
  return std::nullopt;
}

class AddLayerNormFunction : public torch::autograd::Function<AddLayerNormFunction> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                const torch::Tensor& residual,
                                                const torch::Tensor& branch,
                                                const torch::Tensor& weight,
                                                const torch::Tensor& bias, double eps,
                                                int64_t layout, int64_t normed_type) {
    const c10::DeviceGuard guard(residual.device());
    const auto& kernels = add_layer_norm_backend(residual);
    const int64_t cols = weight.numel(), rows = residual.numel() / cols;
    const auto f32 = residual.options().dtype(torch::kFloat32);
    const auto w = weight.to(torch::kFloat32).contiguous();
    const auto b = bias.to(torch::kFloat32).contiguous();
    auto sum = torch::empty_like(residual);
    auto normed = torch::empty(residual.sizes(),
                               residual.options().dtype(static_cast<c10::ScalarType>(normed_type)));
    auto mean = torch::empty({rows}, f32), rstd = torch::empty({rows}, f32);
    kernels.add_layer_norm_forward(static_cast<AddLayerNormLayout>(layout), residual.data_ptr(),
                                   branch.data_ptr(), w.data_ptr<float>(), b.data_ptr<float>(),
                                   rows, cols, static_cast<float>(eps), sum.data_ptr(),
                                   normed.data_ptr(), mean.data_ptr<float>(),
                                   rstd.data_ptr<float>(), kernels.stream(residual.device()));
    ctx->save_for_backward({sum, w, mean, rstd});
    ctx->saved_data["layout"] = layout;
    ctx->saved_data["branch_type"] = static_cast<int64_t>(branch.scalar_type());
    ctx->saved_data["weight_type"] = static_cast<int64_t>(weight.scalar_type());
    ctx->saved_data["bias_type"] = static_cast<int64_t>(bias.scalar_type());
    return {sum, normed};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& sum = saved[0];
    const auto type = [&](const char* key) {
      return static_cast<c10::ScalarType>(ctx->saved_data[key].toInt());
    };
    const auto branch_type = type("branch_type");
    const auto& d_sum = grads[0];
    if (!grads[1].defined()) {  // normed went unused: the add's backward alone
      return {d_sum, d_sum.defined() ? d_sum.to(branch_type) : d_sum, torch::Tensor(),
              torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
    const c10::DeviceGuard guard(sum.device());
    const auto& kernels = add_layer_norm_backend(sum);
    const auto d_normed = grads[1].contiguous();
    const auto d_stream = d_sum.defined() ? d_sum.to(sum.scalar_type()).contiguous() : d_sum;
    const int64_t cols = saved[1].numel(), rows = sum.numel() / cols;
    auto d_residual = torch::empty_like(sum);
    const bool own_branch_grad = branch_type != sum.scalar_type();
    auto d_branch = own_branch_grad ? torch::empty(sum.sizes(), sum.options().dtype(branch_type))
                                    : d_residual;
    auto partial = torch::empty({kernels.add_layer_norm_grad_chunks(rows), 2, cols},
                                sum.options().dtype(torch::kFloat32));
    kernels.add_layer_norm_backward(
        static_cast<AddLayerNormLayout>(ctx->saved_data["layout"].toInt()), sum.data_ptr(),
        d_normed.data_ptr(), d_stream.defined() ? d_stream.data_ptr() : nullptr,
        saved[1].data_ptr<float>(), saved[2].data_ptr<float>(), saved[3].data_ptr<float>(), rows,
        cols, d_residual.data_ptr(), own_branch_grad ? d_branch.data_ptr() : nullptr,
        partial.data_ptr<float>(), kernels.stream(sum.device()));
    const auto param_grads = partial.sum(0);  // a fixed order: deterministic
    return {d_residual,
            d_branch,
            param_grads[0].to(type("weight_type")),
            param_grads[1].to(type("bias_type")),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

AddLayerNormResult add_layer_norm(const torch::Tensor& residual, const torch::Tensor& branch,
                                  const torch::Tensor& weight, const torch::Tensor& bias,
                                  double eps) {
  const auto normed = normed_dtype(residual, branch);
  const auto layout = kernel_layout(residual.scalar_type(), branch.scalar_type(), normed);
  // Empty inputs go to ATen too: no rows would leave the weight gradients' partial sums unwritten.
  const bool fits = layout && residual.sizes() == branch.sizes() &&
                    residual.device() == branch.device() && weight.defined() && bias.defined() &&
                    residual.numel() > 0 && weight.dim() == 1 && bias.dim() == 1 &&
                    weight.numel() == residual.size(-1) && bias.numel() == weight.numel() &&
                    weight.device() == residual.device() && bias.device() == residual.device() &&
                    kernels_for(FusedPath::add_layer_norm, residual.device()) != nullptr;
  if (!fits) return add_layer_norm_reference(residual, branch, weight, bias, eps);
  const auto outputs = AddLayerNormFunction::apply(
      residual.contiguous(), branch.contiguous(), weight, bias, eps,
      static_cast<int64_t>(*layout), static_cast<int64_t>(normed));
  return {outputs[0], outputs[1]};
}

AddLayerNormResult add_layer_norm_reference(const torch::Tensor& residual,
                                            const torch::Tensor& branch,
                                            const torch::Tensor& weight, const torch::Tensor& bias,
                                            double eps) {
  const auto sum = residual + branch;
  // In float32 whatever the dtypes, as autocast runs layer_norm and the kernels compute it: ATen's
  // CUDA layer_norm refuses a half input with the float32 weights a half model's norms keep.
  const auto f32 = [](const torch::Tensor& t) { return t.defined() ? t.to(torch::kFloat32) : t; };
  const auto normed = at::layer_norm(f32(sum), {sum.size(-1)}, f32(weight), f32(bias), eps);
  return {sum, normed.to(normed_dtype(residual, branch))};
}

}  // namespace ampt::kernels
