#include "ampt/precision/fp8_mlp.h"

#include <torch/autograd.h>

#include <array>
#include <vector>

namespace ampt::precision {
namespace {

using Prologue = kernels::Fp8CastSpec::Prologue;

c10::intrusive_ptr<Fp8Linear> layer_in(torch::autograd::AutogradContext* ctx, const char* key) {
  return c10::static_intrusive_pointer_cast<Fp8Linear>(ctx->saved_data[key].toCapsule());
}

// The inputs whose gradients backward computes: bits of `needs`, in the order of forward's.
enum Input : int64_t { kX, kFcWeight, kFcBias, kProjWeight, kProjBias, kTensors };

class Fp8GeluMlpFunction : public torch::autograd::Function<Fp8GeluMlpFunction> {
 public:
  // x [rows, width]; the GEMMs' copies are made only for the gradients in `needs` (autograd runs
  // forward with grad mode off, so the caller says which).
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& fc_weight, const torch::Tensor& fc_bias,
                               const torch::Tensor& proj_weight, const torch::Tensor& proj_bias,
                               const c10::intrusive_ptr<Fp8Linear>& fc,
                               const c10::intrusive_ptr<Fp8Linear>& proj, bool record,
                               int64_t needs) {
    const auto wants = [&](Input i) { return (needs >> i & 1) != 0; };
    // c_proj's input gradient feeds every gradient of c_fc and of x.
    const bool grad_hidden = wants(kX) || wants(kFcWeight) || wants(kFcBias);
    const auto xq = fc->input.quantize(x, record, {.data = true, .transposed = wants(kFcWeight)});
    const auto wq = fc->weight.quantize(fc_weight, record, {.data = true, .transposed = wants(kX)});
    const auto pre = fp8_forward_gemm(xq, wq, fc_bias);
    const auto hq = proj->input.quantize(
        pre, record,
        {.data = true, .transposed = wants(kProjWeight), .prologue = Prologue::gelu_tanh});
    const auto wpq =
        proj->weight.quantize(proj_weight, record, {.data = true, .transposed = grad_hidden});
    ctx->save_for_backward({xq.transposed, xq.transposed_inverse, wq.transposed,
                            wq.transposed_inverse, pre, hq.transposed, hq.transposed_inverse,
                            wpq.transposed, wpq.transposed_inverse});
    ctx->saved_data["fc"] = c10::IValue::make_capsule(fc);
    ctx->saved_data["proj"] = c10::IValue::make_capsule(proj);
    ctx->saved_data["grad_hidden"] = grad_hidden;
    std::vector<int64_t> dtypes;
    for (const auto* t : {&x, &fc_weight, &fc_bias, &proj_weight, &proj_bias}) {
      dtypes.push_back(static_cast<int64_t>(t->scalar_type()));
    }
    ctx->saved_data["dtypes"] = dtypes;
    return fp8_forward_gemm(hq, wpq, proj_bias);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Fp8Saved x_t{saved[0], saved[1]}, fc_w_t{saved[2], saved[3]};
    const auto& pre = saved[4];
    const Fp8Saved hidden_t{saved[5], saved[6]}, proj_w_t{saved[7], saved[8]};
    const auto fc = layer_in(ctx, "fc"), proj = layer_in(ctx, "proj");
    const auto dtypes = ctx->saved_data["dtypes"].toIntVector();
    const auto dtype = [&](Input i) { return static_cast<c10::ScalarType>(dtypes[i]); };
    const auto need = [&](Input i) { return ctx->needs_input_grad(i); };
    const bool grad_hidden = ctx->saved_data["grad_hidden"].toBool();
    const auto dy = grads[0].contiguous();
    torch::autograd::variable_list out(kTensors + 4);  // and none for the layers, record, needs
    const auto g = proj->grad_output.quantize(
        dy, /*record=*/true,
        {.data = grad_hidden, .transposed = need(kProjWeight), .column_sums = need(kProjBias)});
    if (need(kProjWeight)) out[kProjWeight] = fp8_weight_grad(g, hidden_t).to(dtype(kProjWeight));
    if (need(kProjBias)) out[kProjBias] = g.column_sums.to(dtype(kProjBias));
    if (!grad_hidden) return out;
    // The gradient of the GELU's output, in the dtype of its input; the cast below multiplies in
    // the GELU's derivative as it quantises.
    const auto d_hidden = fp8_input_grad(g, proj_w_t, pre.scalar_type());
    const auto gp = fc->grad_output.quantize(d_hidden, /*record=*/true,
                                             {.data = need(kX),
                                              .transposed = need(kFcWeight),
                                              .column_sums = need(kFcBias),
                                              .prologue = Prologue::gelu_tanh_grad,
                                              .pre = pre});
    if (need(kX)) out[kX] = fp8_input_grad(gp, fc_w_t, dtype(kX));
    if (need(kFcWeight)) out[kFcWeight] = fp8_weight_grad(gp, x_t).to(dtype(kFcWeight));
    if (need(kFcBias)) out[kFcBias] = gp.column_sums.to(dtype(kFcBias));
    return out;
  }
};

}  // namespace

torch::Tensor fp8_gelu_mlp(const torch::Tensor& x, const kernels::GeluMlpWeights& weights,
                           const c10::intrusive_ptr<Fp8Linear>& fc,
                           const c10::intrusive_ptr<Fp8Linear>& proj, bool record) {
  const std::array<const torch::Tensor*, kTensors> inputs = {
      &x, &weights.fc_weight, &weights.fc_bias, &weights.proj_weight, &weights.proj_bias};
  int64_t needs = 0;
  if (torch::GradMode::is_enabled()) {
    for (int64_t i = 0; i < kTensors; ++i) needs |= int64_t{inputs[i]->requires_grad()} << i;
  }
  auto sizes = x.sizes().vec();
  sizes.back() = weights.proj_weight.size(0);
  const auto y = Fp8GeluMlpFunction::apply(
      x.reshape({-1, x.size(-1)}).contiguous(), weights.fc_weight, weights.fc_bias,
      weights.proj_weight, weights.proj_bias, fc, proj, record, needs);
  return y.view(sizes);
}

}  // namespace ampt::precision
