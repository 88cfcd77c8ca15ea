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

kernels::Fp8Cast Fp8TensorScaling::quantize(const torch::Tensor& t, bool record,
                                            const kernels::Fp8CastSpec& spec) {
  if (recipe_.scaling == config::Fp8Scaling::rowwise) {
    const auto values = kernels::fp8_cast_values(t, spec);
    auto cast = kernels::cast_fp8_rowwise(values, format_);
    if (spec.column_sums) cast.column_sums = values.sum(0, /*keepdim=*/false, torch::kFloat32);
    return cast;
  }
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
                             record ? state.amaxes.select(0, 0) : torch::Tensor(), state.scratch,
                             spec);
    return kernels::cast_fp8(t, scale, format_, spec, nullptr);
  }
  if (!record) return kernels::cast_fp8(t, state.last_scale, format_, spec, nullptr);
  if (!primed_) {
    kernels::scale_from_amax(t, state.scale, format_, torch::Tensor(), state.scratch, spec);
    primed_ = true;
  }
  return kernels::cast_fp8(t, state.scale, format_, spec, &state);
}

namespace {

// Row-wise GEMMs (CUTLASS's on Ada) write bfloat16 only; their factors are vectors.
bool rowwise(const kernels::Fp8Cast& cast) { return cast.inverse.dim() > 0; }

}  // namespace

torch::Tensor fp8_forward_gemm(const kernels::Fp8Cast& xq, const kernels::Fp8Cast& wq,
                               const torch::Tensor& bias) {
  // _scaled_mm wants its first operand row-major and its second column-major: wq.data.t() is.
  return kernels::fp8_gemm(xq.data, wq.data.t(), xq.inverse, wq.inverse,
                           bias.to(torch::kBFloat16), torch::kBFloat16, /*fast_accum=*/true);
}

torch::Tensor fp8_input_grad(const kernels::Fp8Cast& g, const Fp8Saved& w_t,
                             c10::ScalarType dtype) {
  // dx = dy · W: [M, out] · [out, in], W column-major as Wᵀ row-major.
  return kernels::fp8_gemm(g.data, w_t.data.t(), g.inverse, w_t.inverse, {},
                           rowwise(g) ? torch::kBFloat16 : dtype, false)
      .to(dtype);
}

torch::Tensor fp8_weight_grad(const kernels::Fp8Cast& g, const Fp8Saved& x_t) {
  // dW = dyᵀ · x: [out, M] · [M, in], x column-major as xᵀ row-major.
  return kernels::fp8_gemm(g.transposed, x_t.data.t(), g.transposed_inverse, x_t.inverse, {},
                           rowwise(g) ? torch::kBFloat16 : torch::kFloat32, false);
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
    const auto xq = layer->input.quantize(x.reshape({-1, in}), record,
                                          {.data = true, .transposed = grad_weight});
    const auto wq = layer->weight.quantize(weight, record, {.data = true, .transposed = grad_x});
    const auto y = fp8_forward_gemm(xq, wq, bias);
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
    const Fp8Saved x_t{saved[0], saved[1]}, w_t{saved[2], saved[3]};
    const auto layer =
        c10::static_intrusive_pointer_cast<Fp8Linear>(ctx->saved_data["layer"].toCapsule());
    const auto dtype = [&](const char* key) {
      return static_cast<c10::ScalarType>(ctx->saved_data[key].toInt());
    };
    const auto& dy = grad_outputs[0];
    const bool grad_x = ctx->needs_input_grad(0), grad_weight = ctx->needs_input_grad(1),
               grad_bias = ctx->needs_input_grad(2);
    const auto g = layer->grad_output.quantize(
        dy.reshape({-1, dy.size(-1)}), /*record=*/true,
        {.data = grad_x, .transposed = grad_weight, .column_sums = grad_bias});
    torch::Tensor dx, dw, db;
    if (grad_x) {
      auto dx_shape = dy.sizes().vec();
      dx_shape.back() = w_t.data.size(0);
      dx = fp8_input_grad(g, w_t, dtype("x_dtype")).view(dx_shape);
    }
    if (grad_weight) dw = fp8_weight_grad(g, x_t).to(dtype("weight_dtype"));
    if (grad_bias) db = g.column_sums.to(dtype("bias_dtype"));
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
