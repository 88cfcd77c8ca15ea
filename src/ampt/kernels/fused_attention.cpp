#include "ampt/kernels/fused_attention.h"

#include "ampt/kernels/fused_linear.h"

#include <ATen/Context.h>
#include <ATen/ops/_fused_sdp_choice.h>
#include <ATen/ops/_scaled_dot_product_flash_attention.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_backward.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward.h>
#include <torch/autograd.h>

#include <array>
#include <cmath>
#include <map>
#include <mutex>
#include <tuple>

namespace ampt::kernels {
namespace {

constexpr int64_t kFlashAttention = 1;  // sdp::SDPBackend::flash_attention

// q, k and v [B, H, T, D] as views of qkv [B·T, 3·C]: what split and the heads' view and
// transpose give, the same strides.
std::array<torch::Tensor, 3> heads_of(const torch::Tensor& qkv, int64_t batch, int64_t heads) {
  const int64_t time = qkv.size(0) / batch, width = qkv.size(1) / 3;
  const auto split = qkv.view({batch, time, 3, heads, width / heads}).permute({2, 0, 3, 1, 4});
  return {split[0], split[1], split[2]};
}

// Whether scaled_dot_product_attention takes its flash kernel for inputs like these: asked of
// ATen once per shape, dtype, device and mode.
bool flash_for(const torch::Tensor& x, int64_t heads, bool grad) {
  using Key = std::tuple<int, int, int, int64_t, int64_t, int64_t, bool, bool>;
  static std::mutex mutex;
  static std::map<Key, bool> known;
  const int64_t batch = x.size(0), time = x.size(1), width = x.size(2);
  const bool deterministic = at::globalContext().deterministicAlgorithms();
  const Key key{static_cast<int>(x.device().type()), x.device().index(),
                static_cast<int>(x.scalar_type()), batch, time, width, grad, deterministic};
  const std::lock_guard lock(mutex);
  if (const auto found = known.find(key); found != known.end()) return found->second;
  const auto qkv = torch::empty({batch * time, 3 * width}, x.options()).requires_grad_(grad);
  const auto [q, k, v] = heads_of(qkv, batch, heads);
  const auto choice = at::_fused_sdp_choice(q, k, v, {}, 0.0, /*is_causal=*/true);
  return known[key] = choice == kFlashAttention;
}

class CausalAttentionFunction : public torch::autograd::Function<CausalAttentionFunction> {
 public:
  // input [B, T, C] in the compute dtype; the four weights what autograd differentiates and,
  // where given, their half copies that the matmuls read instead (fused_linear.h).
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& input,
                               const torch::Tensor& attn_weight, const torch::Tensor& attn_bias,
                               const torch::Tensor& proj_weight, const torch::Tensor& proj_bias,
                               const std::optional<torch::Tensor>& attn_weight_copy,
                               const std::optional<torch::Tensor>& attn_bias_copy,
                               const std::optional<torch::Tensor>& proj_weight_copy,
                               const std::optional<torch::Tensor>& proj_bias_copy, int64_t batch,
                               int64_t heads, bool epilogues, bool fp32_grad) {
    const auto x = input.reshape({-1, input.size(-1)});  // [B·T, C]
    const bool copies = attn_weight_copy.has_value();
    const auto& w1 = copies ? *attn_weight_copy : attn_weight;
    const auto& b1 = copies ? *attn_bias_copy : attn_bias;
    const auto& w2 = copies ? *proj_weight_copy : proj_weight;
    const auto& b2 = copies ? *proj_bias_copy : proj_bias;
    const auto qkv = at::addmm(b1, x, w1.t());
    const auto [q, k, v] = heads_of(qkv, batch, heads);
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
    torch::Tensor out, lse, cum_q, cum_k, seed, offset;
    int64_t max_q = 0, max_k = 0;
    if (x.is_cuda()) {
      auto r = at::_scaled_dot_product_flash_attention(q, k, v, 0.0, /*is_causal=*/true,
                                                       /*return_debug_mask=*/false, scale);
      out = std::get<0>(r);
      lse = std::get<1>(r);
      cum_q = std::get<2>(r);
      cum_k = std::get<3>(r);
      max_q = std::get<4>(r).expect_int();
      max_k = std::get<5>(r).expect_int();
      seed = std::get<6>(r);
      offset = std::get<7>(r);
    } else {
      std::tie(out, lse) =
          at::_scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, /*is_causal=*/true);
    }
    // [B, H, T, D] → [B·T, C], as the composite's transpose, contiguous and view.
    const auto y = out.transpose(1, 2).contiguous().view({x.size(0), x.size(1)});
    ctx->save_for_backward({x, qkv, out, lse, y, w1, w2, attn_weight, attn_bias, proj_weight,
                            proj_bias, cum_q, cum_k, seed, offset});
    ctx->saved_data["batch"] = batch;
    ctx->saved_data["heads"] = heads;
    ctx->saved_data["max_q"] = max_q;
    ctx->saved_data["max_k"] = max_k;
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["epilogues"] = epilogues;
    ctx->saved_data["copies"] = copies;
    ctx->saved_data["fp32_grad"] = fp32_grad;
    return addmm_as(input.sizes(), b2, y, w2);
  }

  // Each gradient as the composite's nodes form it: c_proj's as fused_linear's backward, the
  // attention's by the backward PyTorch pairs with its forward kernel, c_attn's again as
  // fused_linear's.
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto s = ctx->get_saved_variables();
    const auto &x = s[0], &qkv = s[1], &out = s[2], &lse = s[3], &y = s[4], &w1 = s[5],
               &w2 = s[6];
    const auto data = [&](const char* key) { return ctx->saved_data[key]; };
    const int64_t batch = data("batch").toInt(), heads = data("heads").toInt();
    const double scale = data("scale").toDouble();
    const bool epilogues = data("epilogues").toBool(), copies = data("copies").toBool();
    const bool fp32_grad = data("fp32_grad").toBool();
    const auto need = [&](int i) { return ctx->needs_input_grad(i); };
    const auto param_grads = [&](const torch::Tensor& d_out, const torch::Tensor& input, int w,
                                 int b) {
      const auto in = [&] { return input; };
      return copies ? half_param_grads(d_out, in, s[7 + w - 1], s[7 + b - 1], need(w), need(b),
                                       epilogues, fp32_grad)
                    : linear_param_grads(d_out, in, need(w), need(b), epilogues);
    };
    const auto dz = grads[0].reshape({-1, grads[0].size(-1)}).contiguous();
    const auto proj = param_grads(dz, y, 3, 4);
    const auto dy = dz.mm(w2);
    const auto [q, k, v] = heads_of(qkv, batch, heads);
    const int64_t time = x.size(0) / batch, width = x.size(1);
    const auto grad_out = dy.view({batch, time, heads, width / heads}).transpose(1, 2);
    torch::Tensor dq, dk, dv;
    if (x.is_cuda()) {
      std::tie(dq, dk, dv) = at::_scaled_dot_product_flash_attention_backward(
          grad_out.contiguous(), q, k, v, out, lse, s[11], s[12], data("max_q").toInt(),
          data("max_k").toInt(), 0.0, /*is_causal=*/true, s[13], s[14], scale);
    } else {
      std::tie(dq, dk, dv) = at::_scaled_dot_product_flash_attention_for_cpu_backward(
          grad_out, q, k, v, out, lse, 0.0, /*is_causal=*/true);
    }
    // [B, H, T, D] each → [B·T, 3·C], laid out as qkv.
    const auto dqkv = at::cat({dq.transpose(1, 2), dk.transpose(1, 2), dv.transpose(1, 2)}, 2)
                          .view({x.size(0), 3 * width});
    const auto attn = param_grads(dqkv, x, 1, 2);
    return gradients({need(0) ? dqkv.mm(w1).view({batch, time, width}) : torch::Tensor(),
                      attn.weight, attn.bias, proj.weight, proj.bias},
                     13);
  }
};

}  // namespace

std::optional<torch::Tensor> fused_causal_attention(const torch::Tensor& x,
                                                    const AttentionWeights& weights, int64_t heads,
                                                    bool epilogues) {
  if (x.dim() != 3 || x.size(2) % heads != 0 || x.numel() == 0) return std::nullopt;
  if (!x.is_cpu() && !x.is_cuda()) return std::nullopt;
  const auto in = autocast_linear_arg(x);
  const bool grad = torch::GradMode::is_enabled();
  if (!flash_for(in, heads, grad)) return std::nullopt;
  const int64_t batch = x.size(0);
  const auto a = two_linear_args(weights.attn_weight, weights.attn_bias, weights.proj_weight,
                                 weights.proj_bias);
  return CausalAttentionFunction::apply(in, a.weight1, a.bias1, a.weight2, a.bias2,
                                        a.copy_weight1, a.copy_bias1, a.copy_weight2,
                                        a.copy_bias2, batch, heads, epilogues, a.fp32_grad);
}

}  // namespace ampt::kernels
