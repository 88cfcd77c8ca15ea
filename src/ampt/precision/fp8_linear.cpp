#include "ampt/precision/fp8_linear.h"

#include <ATen/ops/_scaled_mm.h>
#include <torch/autograd.h>

#include <cmath>

namespace ampt::precision {

Fp8Recipe fp8_recipe(const config::Config& config) {
  return {config.fp8_scaling, config.fp8_amax_history_len, config.fp8_amax_compute_algo,
          config.fp8_margin};
}

double fp8_max(c10::ScalarType fp8_dtype) {
  return fp8_dtype == c10::kFloat8_e5m2 ? 57344.0 : 448.0;
}

torch::Tensor quantize_fp8(const torch::Tensor& t, const torch::Tensor& scale,
                           c10::ScalarType fp8_dtype) {
  const double max = fp8_max(fp8_dtype);
  return (t.to(torch::kFloat32) * scale).clamp_(-max, max).to(fp8_dtype);
}

Fp8TensorScaling::Fp8TensorScaling(const Fp8Recipe& recipe, c10::ScalarType fp8_dtype)
    : recipe_(recipe), dtype_(fp8_dtype), max_(fp8_max(fp8_dtype)) {}

std::pair<torch::Tensor, torch::Tensor> Fp8TensorScaling::quantize(const torch::Tensor& t,
                                                                   bool record) {
  const auto options = torch::dtype(torch::kFloat32).device(t.device());
  if (!scale_.defined()) {
    scale_ = torch::ones({}, options);
    history_ = torch::zeros({recipe_.amax_history_len}, options);
  }
  const auto amax = t.abs().amax().to(torch::kFloat32);
  const double headroom = std::ldexp(1.0, static_cast<int>(recipe_.margin));
  const auto scale_from = [&](const torch::Tensor& a) {
    const auto usable = a.gt(0).logical_and_(a.isfinite());
    return torch::where(usable, max_ / headroom / a, scale_);
  };

  if (recipe_.scaling == config::Fp8Scaling::current) {
    const auto scale = scale_from(amax);
    if (record) {
      scale_.copy_(scale);
      history_.select(0, 0).copy_(amax);
    }
    return {quantize_fp8(t, scale, dtype_), scale.reciprocal()};
  }
  if (record) {
    const auto past = recipe_.amax_compute_algo == config::Fp8AmaxAlgo::max
                          ? history_.amax()
                          : history_.select(0, 0);
    scale_.copy_(scale_from(torch::where(past.gt(0), past, amax)));
    // TransformerEngine's ring: slot 0 is the newest, rolled to the back on the next call.
    if (recipe_.amax_history_len > 1) history_.copy_(history_.roll(-1));
    history_.select(0, 0).copy_(amax);
  }
  return {quantize_fp8(t, scale_, dtype_), scale_.reciprocal()};
}

namespace {

// The fp8 GEMMs as an autograd function, since at::_scaled_mm has no autograd of its own.
// Forward keeps the fp8 copies of x and the weight (half the bytes of bf16) for backward.
class Fp8LinearFunction : public torch::autograd::Function<Fp8LinearFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const torch::Tensor& bias,
                               const c10::intrusive_ptr<Fp8Linear>& layer, bool record) {
    const int64_t in = weight.size(1);
    auto [xq, x_inv] = layer->input.quantize(x.reshape({-1, in}), record);
    auto [wq, w_inv] = layer->weight.quantize(weight, record);
    // _scaled_mm wants its first operand row-major and its second column-major: wq.t() is.
    const auto y = at::_scaled_mm(xq, wq.t(), x_inv, w_inv, bias.to(torch::kBFloat16),
                                  /*scale_result=*/{}, torch::kBFloat16);
    ctx->save_for_backward({xq, x_inv, wq, w_inv});
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
    const auto& xq = saved[0];
    const auto& x_inv = saved[1];
    const auto& wq = saved[2];
    const auto& w_inv = saved[3];
    const auto layer =
        c10::static_intrusive_pointer_cast<Fp8Linear>(ctx->saved_data["layer"].toCapsule());
    const auto dtype = [&](const char* key) {
      return static_cast<c10::ScalarType>(ctx->saved_data[key].toInt());
    };
    const auto& dy = grad_outputs[0];
    const int64_t out = wq.size(0);
    const auto dy2 = dy.reshape({-1, out});
    auto [gq, g_inv] = layer->grad_output.quantize(dy2, /*record=*/true);
    // dx = dy · W: [M, out] · [out, in], W column-major.
    const auto dx = at::_scaled_mm(gq, wq.t().contiguous().t(), g_inv, w_inv, {}, {},
                                   dtype("x_dtype"));
    // dW = dyᵀ · x: [out, M] row-major · [M, in] column-major, accumulated in float32.
    const auto dw = at::_scaled_mm(gq.t().contiguous(), xq.t().contiguous().t(), g_inv, x_inv,
                                   {}, {}, torch::kFloat32);
    const auto db = dy2.sum(0, /*keepdim=*/false, torch::kFloat32);
    auto dx_shape = dy.sizes().vec();
    dx_shape.back() = wq.size(1);
    return {dx.view(dx_shape), dw.to(dtype("weight_dtype")), db.to(dtype("bias_dtype")),
            torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

Fp8Linear::Fp8Linear(const Fp8Recipe& recipe)
    : input(recipe, c10::kFloat8_e4m3fn),
      weight(recipe, c10::kFloat8_e4m3fn),
      grad_output(recipe, c10::kFloat8_e5m2) {}

torch::Tensor Fp8Linear::forward(const torch::Tensor& x, const torch::Tensor& weight_,
                                 const torch::Tensor& bias, bool record) {
  return Fp8LinearFunction::apply(x, weight_, bias,
                                  c10::intrusive_ptr<Fp8Linear>::reclaim_copy(this), record);
}

}  // namespace ampt::precision
