#include "ampt/precision/fp8_linear.h"

#include "ampt/kernels/fp8_gemm.h"

#include <torch/autograd.h>

namespace ampt::precision {

Fp8Recipe fp8_recipe(const config::Config& config) {
  return {config.fp8_scaling, config.fp8_amax_history_len, config.fp8_amax_compute_algo,
          config.fp8_margin};
}

Fp8TensorScaling::Fp8TensorScaling(const Fp8Recipe& recipe, c10::ScalarType fp8_dtype)
    : recipe_(recipe), format_{fp8_dtype, recipe.margin} {}

torch::Tensor Fp8TensorScaling::scale() const {
  if (!state_) return {};
  return recipe_.scaling == config::Fp8Scaling::delayed ? state_->last_scale : state_->scale;
}

kernels::Fp8Cast Fp8TensorScaling::quantize(const torch::Tensor& t, bool record, bool want_data,
                                            bool want_transposed, bool want_column_sums) {
  if (recipe_.scaling == config::Fp8Scaling::rowwise) return kernels::cast_fp8_rowwise(t, format_);
  const bool delayed = recipe_.scaling == config::Fp8Scaling::delayed;
  if (!state_) {
    state_ = kernels::Fp8History::zeros(delayed ? recipe_.amax_history_len : 1,
                                        recipe_.amax_compute_algo == config::Fp8AmaxAlgo::max,
                                        t.device());
  }
  auto& state = *state_;
  if (!delayed) {
    // The state keeps the latest recorded call's scale and amax; an unusable amax keeps the scale.
    const auto scale = record ? state.scale : state.scale.clone();
    kernels::scale_from_amax(t, scale, format_,
                             record ? state.amaxes.select(0, 0) : torch::Tensor(), state.scratch);
    return kernels::cast_fp8(t, scale, format_, want_data, want_transposed, nullptr, true,
                             want_column_sums);
  }
  if (!record) {
    return kernels::cast_fp8(t, state.last_scale, format_, want_data, want_transposed, nullptr,
                             true, want_column_sums);
  }
  if (!primed_) {
    kernels::scale_from_amax(t, state.scale, format_, torch::Tensor(), state.scratch);
    primed_ = true;
  }
  return kernels::cast_fp8(t, state.scale, format_, want_data, want_transposed, &state, true,
                           want_column_sums);
}

namespace {

using config::Fp8Scaling;

// The fp8 GEMMs as an autograd function, since at::_scaled_mm has no autograd of its own.
class Fp8LinearFunction : public torch::autograd::Function<Fp8LinearFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const torch::Tensor& bias,
                               const c10::intrusive_ptr<Fp8Linear>& layer, bool record,
                               bool grad_x, bool grad_weight) {
    const int64_t in = weight.size(1);
    // xᵀ serves dW, Wᵀ serves dx: each is made only when that gradient will be.
    const auto xq = layer->input.quantize(x.reshape({-1, in}), record, true, grad_weight);
    const auto wq = layer->weight.quantize(weight, record, true, grad_x);
    // _scaled_mm wants its first operand row-major and its second column-major: wq.data.t() is.
    const auto y = kernels::fp8_gemm(xq.data, wq.data.t(), xq.inverse, wq.inverse,
                                     bias.to(torch::kBFloat16), torch::kBFloat16,
                                     /*fast_accum=*/true);
    ctx->save_for_backward({xq.transposed, xq.transposed_inverse, wq.transposed,
                            wq.transposed_inverse});
    ctx->saved_data["layer"] = c10::IValue::make_capsule(layer);
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    ctx->saved_data["weight_dtype"] = static_cast<int64_t>(weight.scalar_type());
    ctx->saved_data["bias_dtype"] = static_cast<int64_t>(bias.scalar_type());
    auto shape = x.sizes().vec();
    shape.back() = weight.size(0);
    return y.view(shape);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const auto& x_t = saved[0];
    const auto& x_t_inverse = saved[1];
    const auto& w_t = saved[2];
    const auto& w_t_inverse = saved[3];
    const auto layer =
        c10::static_intrusive_pointer_cast<Fp8Linear>(ctx->saved_data["layer"].toCapsule());
    const auto dtype = [&](const char* key) {
      return static_cast<c10::ScalarType>(ctx->saved_data[key].toInt());
    };
    const auto& dy = grad_outputs[0];
    const int64_t out = dy.size(-1);
    const auto dy2 = dy.reshape({-1, out});
    const bool grad_x = ctx->needs_input_grad(0), grad_weight = ctx->needs_input_grad(1),
               grad_bias = ctx->needs_input_grad(2);
    // Row-wise GEMMs (CUTLASS's on Ada) write bfloat16 only.
    const bool rowwise = x_t_inverse.dim() > 0;
    const auto g = layer->grad_output.quantize(dy2, /*record=*/true, grad_x, grad_weight, grad_bias);
    torch::Tensor dx, dw;
    if (grad_x) {
      // dx = dy · W: [M, out] · [out, in], W column-major as Wᵀ row-major.
      auto dx_shape = dy.sizes().vec();
      dx_shape.back() = w_t.size(0);
      dx = kernels::fp8_gemm(g.data, w_t.t(), g.inverse, w_t_inverse, {},
                             rowwise ? torch::kBFloat16 : dtype("x_dtype"), false)
               .to(dtype("x_dtype"))
               .view(dx_shape);
    }
    if (grad_weight) {
      // dW = dyᵀ · x: [out, M] · [M, in], x column-major as xᵀ row-major.
      dw = kernels::fp8_gemm(g.transposed, x_t.t(), g.transposed_inverse, x_t_inverse, {},
                             rowwise ? torch::kBFloat16 : torch::kFloat32, false)
               .to(dtype("weight_dtype"));
    }
    torch::Tensor db;
    if (grad_bias) {
      const auto sums = g.column_sums.defined() ? g.column_sums
                                                : dy2.sum(0, /*keepdim=*/false, torch::kFloat32);
      db = sums.to(dtype("bias_dtype"));
    }
    return {dx, dw, db, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

Fp8Linear::Fp8Linear(const Fp8Recipe& recipe)
    : input(recipe, c10::kFloat8_e4m3fn),
      weight(recipe, c10::kFloat8_e4m3fn),
      grad_output(recipe, recipe.scaling == Fp8Scaling::rowwise ? c10::kFloat8_e4m3fn
                                                                : c10::kFloat8_e5m2) {}

torch::Tensor Fp8Linear::forward(const torch::Tensor& x, const torch::Tensor& weight_,
                                 const torch::Tensor& bias, bool record) {
  const bool grad = torch::GradMode::is_enabled();
  return Fp8LinearFunction::apply(x, weight_, bias,
                                  c10::intrusive_ptr<Fp8Linear>::reclaim_copy(this), record,
                                  grad && x.requires_grad(), grad && weight_.requires_grad());
}

}  // namespace ampt::precision
