#include "ampt/kernels/self_check.h"

#include "ampt/core/errors.h"
#include "ampt/kernels/add_layer_norm.h"
#include "ampt/kernels/dequantize.h"
#include "ampt/kernels/fp8_gemm.h"
#include "ampt/kernels/fp8_quantize.h"
#include "ampt/kernels/fused_adamw.h"
#include "ampt/kernels/fused_classifier.h"
#include "ampt/kernels/gemm_epilogues.h"
#include "ampt/kernels/kernel_support.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace ampt::kernels {
namespace {

// Rounding explains this much relative error in each precision (norm-wise, over a few thousand
// values; float32 matmuls may be TF32's, --allow_tf32); a wrong index, a missing barrier or a
// broken image gives errors near 1.
constexpr double kFloat32Tolerance = 5e-3;
constexpr double kHalfTolerance = 3e-2;
constexpr double kFp8Tolerance = 8e-2;

// The half dtype the device computes in: bfloat16 from Ampere (8.0) on, float16 before.
c10::ScalarType half_dtype(const c10::Device& device) {
  return kernel_support().backend().capability(device) >= 80 ? torch::kBFloat16 : torch::kHalf;
}

// Random inputs, the same on every GPU and every run.
class Inputs {
 public:
  explicit Inputs(const c10::Device& device) : device_(device) { generator_.set_current_seed(29); }
  torch::Tensor randn(std::vector<int64_t> shape, c10::ScalarType dtype) {
    return at::randn(shape, generator_, torch::dtype(torch::kFloat32))
        .to(torch::TensorOptions().device(device_).dtype(dtype));
  }
  // `n` random bytes of `dtype` (uint8 or int8) over [low, high).
  torch::Tensor bytes(int64_t n, int64_t low, int64_t high, c10::ScalarType dtype) {
    return at::randint(low, high, {n}, generator_, torch::dtype(torch::kInt32))
        .to(torch::TensorOptions().device(device_).dtype(dtype));
  }

 private:
  c10::Device device_;
  at::Generator generator_ = at::detail::createCPUGenerator();
};

// The worst of several comparisons, for the status line.
class Errors {
 public:
  void add(double error) { worst_ = std::max(worst_, error); }
  std::string text() const { return fmt::format("max relative error {:.1e}", worst_); }

 private:
  double worst_ = 0.0;
};

torch::Tensor float64(const torch::Tensor& t) { return t.detach().to(torch::kCPU, torch::kFloat64); }

}  // namespace

double require_close(const std::string& what, const torch::Tensor& got, const torch::Tensor& want,
                     double tolerance) {
  const auto g = float64(got), w = float64(want);
  if (g.sizes() != w.sizes()) {
    throw RuntimeError(fmt::format("{}: shape {} where ATen gives {}", what, fmt::join(g.sizes(), "x"),
                                   fmt::join(w.sizes(), "x")));
  }
  if (!g.isfinite().all().item<bool>() && w.isfinite().all().item<bool>()) {
    throw RuntimeError(fmt::format("{}: non-finite values where ATen's are finite", what));
  }
  const double norm = w.norm().item<double>();
  const double diff = (g - w).norm().item<double>();
  const double error = norm > 0.0 ? diff / norm : diff;
  if (!(error <= tolerance)) {
    throw RuntimeError(fmt::format("{}: relative error {:.3g} against ATen, more than the {:.0e} "
                                   "its arithmetic explains",
                                   what, error, tolerance));
  }
  return error;
}

std::string check_softmax_cross_entropy(const c10::Device& device) {
  Inputs inputs(device);
  Errors errors;
  const auto targets = torch::tensor(std::vector<int64_t>{3, 0, kIgnoreIndex, 289, 17, 100, 5, 250},
                                     torch::dtype(torch::kInt64).device(device))
                           .repeat({8});
  for (const auto dtype : {torch::kFloat32, half_dtype(device)}) {
    const double tolerance = dtype == torch::kFloat32 ? kFloat32Tolerance : kHalfTolerance;
    const auto name = fmt::format("softmax+loss kernel in {}", c10::toString(dtype));
    // 300 classes of which 290 are real: the padded columns must stay out of the softmax.
    const auto hidden = inputs.randn({64, 32}, dtype).requires_grad_();
    const auto weight = inputs.randn({300, 32}, dtype).requires_grad_();
    const auto fused = classifier_loss(hidden, weight, targets, {290, 16, false});
    const auto reference = classifier_loss_reference(hidden, weight, targets, 290);
    errors.add(require_close(name + ": loss", fused, reference, tolerance));
    const auto got = torch::autograd::grad({fused}, {hidden, weight});
    const auto want = torch::autograd::grad({reference}, {hidden, weight});
    errors.add(require_close(name + ": hidden's gradient", got[0], want[0], tolerance));
    errors.add(require_close(name + ": weight's gradient", got[1], want[1], tolerance));
  }
  return errors.text();
}

std::string check_add_layer_norm(const c10::Device& device) {
  Inputs inputs(device);
  Errors errors;
  const auto half = half_dtype(device);
  // The layouts training meets: fp32, O1's fp32 stream with half branches (under autocast, off
  // here: normed then comes out in the stream's dtype, a layout ATen handles), and wholly half.
  for (const auto dtype : {torch::kFloat32, half}) {
    const double tolerance = dtype == torch::kFloat32 ? kFloat32Tolerance : kHalfTolerance;
    const auto name = fmt::format("add+LayerNorm kernel in {}", c10::toString(dtype));
    const auto residual = inputs.randn({48, 96}, dtype).requires_grad_();
    const auto branch = inputs.randn({48, 96}, dtype).requires_grad_();
    const auto weight = inputs.randn({96}, torch::kFloat32).requires_grad_();
    const auto bias = inputs.randn({96}, torch::kFloat32).requires_grad_();
    const auto d_sum = inputs.randn({48, 96}, dtype);
    const auto d_normed = inputs.randn({48, 96}, dtype);
    const std::vector<torch::Tensor> leaves = {residual, branch, weight, bias};
    const auto fused = add_layer_norm(residual, branch, weight, bias, 1e-5);
    const auto reference = add_layer_norm_reference(residual, branch, weight, bias, 1e-5);
    errors.add(require_close(name + ": sum", fused.sum, reference.sum, tolerance));
    errors.add(require_close(name + ": normed", fused.normed, reference.normed, tolerance));
    const auto got = torch::autograd::grad({fused.sum, fused.normed}, leaves, {d_sum, d_normed});
    const auto want =
        torch::autograd::grad({reference.sum, reference.normed}, leaves, {d_sum, d_normed});
    const char* names[] = {"residual's", "branch's", "weight's", "bias's"};
    for (size_t i = 0; i < leaves.size(); ++i) {
      errors.add(require_close(fmt::format("{}: {} gradient", name, names[i]), got[i], want[i],
                               tolerance));
    }
  }
  return errors.text();
}

std::string check_fp8_casts(const c10::Device& device) {
  Inputs inputs(device);
  Errors errors;
  const auto x = inputs.randn({128, 64}, torch::kBFloat16);
  const auto pre = inputs.randn({128, 64}, torch::kBFloat16);
  const auto scratch = torch::zeros({2}, torch::dtype(torch::kInt32).device(device));
  for (const auto dtype : {c10::kFloat8_e4m3fn, c10::kFloat8_e5m2}) {
    const Fp8Format format{dtype, 0};
    const auto name = fmt::format("fp8 cast kernels to {}", c10::toString(dtype));
    Fp8CastSpec spec{.data = true, .transposed = true, .column_sums = true,
                     .prologue = Fp8CastSpec::Prologue::gelu_tanh_grad, .pre = pre};
    auto scale = torch::ones({}, torch::dtype(torch::kFloat32).device(device));
    auto aten_scale = scale.clone();
    scale_from_amax(x, scale, format, {}, scratch, spec, /*use_kernel=*/true);
    scale_from_amax(x, aten_scale, format, {}, scratch, spec, /*use_kernel=*/false);
    errors.add(require_close(name + ": scale", scale, aten_scale, kFloat32Tolerance));
    const auto got = cast_fp8(x, scale, format, spec, nullptr, /*use_kernel=*/true);
    const auto want = cast_fp8(x, aten_scale, format, spec, nullptr, /*use_kernel=*/false);
    errors.add(require_close(name + ": data", got.data, want.data, kFp8Tolerance));
    errors.add(require_close(name + ": transposed", got.transposed, want.transposed, kFp8Tolerance));
    errors.add(require_close(name + ": column sums", got.column_sums, want.column_sums,
                             kFloat32Tolerance));
  }
  const Fp8Format e4m3{c10::kFloat8_e4m3fn, 0};
  const auto got = cast_fp8_rowwise(x, e4m3, /*use_kernel=*/true);
  const auto want = cast_fp8_rowwise(x, e4m3, /*use_kernel=*/false);
  errors.add(require_close("fp8 row-wise cast kernels: data", got.data, want.data, kFp8Tolerance));
  errors.add(require_close("fp8 row-wise cast kernels: row factors", got.inverse, want.inverse,
                           kFloat32Tolerance));
  errors.add(require_close("fp8 row-wise cast kernels: column factors", got.transposed_inverse,
                           want.transposed_inverse, kFloat32Tolerance));
  return errors.text();
}

std::string check_gemm_epilogues(const c10::Device& device) {
  Inputs inputs(device);
  Errors errors;
  const auto dtype = half_dtype(device);
  const auto x = inputs.randn({64, 96}, dtype);
  const auto weight = inputs.randn({128, 96}, dtype);
  const auto bias = inputs.randn({128}, dtype);
  const auto dy = inputs.randn({64, 128}, dtype);
  const auto none = [](const char* what) {
    return RuntimeError(fmt::format("cuBLASLt offers no algorithm for the {} epilogue here", what));
  };
  const auto x64 = float64(x), w64 = float64(weight), dy64 = float64(dy);

  const auto forward = linear_gelu(x, weight, bias);
  if (!forward) throw none("bias + GELU");
  const auto pre = x64.mm(w64.t()) + float64(bias);
  errors.add(require_close("bias + GELU epilogue: pre-activation", forward->first, pre,
                           kHalfTolerance));
  errors.add(require_close("bias + GELU epilogue: GELU", forward->second, at::gelu(pre, "tanh"),
                           kHalfTolerance));

  const auto pre_in = inputs.randn({64, 96}, dtype);
  const auto d_pre = linear_input_grad_dgelu(dy, weight, pre_in);
  if (!d_pre) throw none("GELU-gradient");
  errors.add(require_close("GELU-gradient epilogue",
                           *d_pre, at::gelu_backward(dy64.mm(w64), float64(pre_in), "tanh"),
                           kHalfTolerance));

  const auto grads = linear_weight_bias_grad(dy, x);
  if (!grads) throw none("bias-gradient");
  errors.add(require_close("bias-gradient epilogue: weight's gradient", grads->first,
                           dy64.t().mm(x64), kHalfTolerance));
  errors.add(require_close("bias-gradient epilogue: bias's gradient", grads->second, dy64.sum(0),
                           kHalfTolerance));
  return errors.text();
}

namespace {

// a [32, 64] · b [64, 48] through _scaled_mm from fp8 copies made by ATen, against the product
// of the dequantised copies.
std::string check_scaled_mm(const c10::Device& device, bool rowwise) {
  Inputs inputs(device);
  const auto a = inputs.randn({32, 64}, torch::kBFloat16);
  const auto w = inputs.randn({48, 64}, torch::kBFloat16);
  const Fp8Format e4m3{c10::kFloat8_e4m3fn, 0};
  const auto cast = [&](const torch::Tensor& x) {
    if (rowwise) return cast_fp8_rowwise(x, e4m3, /*use_kernel=*/false);
    const auto scale = torch::ones({}, torch::dtype(torch::kFloat32).device(device));
    scale_from_amax(x, scale, e4m3, {}, {}, {}, /*use_kernel=*/false);
    return cast_fp8(x, scale, e4m3, {.data = true, .transposed = false}, nullptr,
                    /*use_kernel=*/false);
  };
  const auto a8 = cast(a), w8 = cast(w);
  const auto got = fp8_gemm(a8.data, w8.data.t(), a8.inverse, w8.inverse, {}, torch::kBFloat16,
                            /*fast_accum=*/false);
  const auto inverse_column = [&](const torch::Tensor& inverse) {
    return rowwise ? float64(inverse).unsqueeze(1) : float64(inverse);
  };
  const auto want = (float64(a8.data) * inverse_column(a8.inverse))
                        .mm((float64(w8.data) * inverse_column(w8.inverse)).t());
  Errors errors;
  errors.add(require_close(rowwise ? "fp8 GEMM with row-wise scales" : "fp8 GEMM", got, want,
                           kHalfTolerance));
  return errors.text();
}

}  // namespace

std::string check_fp8_gemm(const c10::Device& device) { return check_scaled_mm(device, false); }

std::string check_fp8_rowwise_gemm(const c10::Device& device) {
  return check_scaled_mm(device, true);
}

std::string check_adamw(const c10::Device& device) {
  Inputs inputs(device);
  Errors errors;
  const auto half = half_dtype(device);
  // Two parameters (one with a copy, one without) in the middle of a run: step 3, moments set.
  AdamWTensorLists lists;
  for (const auto& shape : {std::vector<int64_t>{64, 96}, std::vector<int64_t>{96}}) {
    lists.params.push_back(inputs.randn(shape, torch::kFloat32));
    lists.grads.push_back(inputs.randn(shape, torch::kFloat32));
    lists.exp_avgs.push_back(inputs.randn(shape, torch::kFloat32).mul_(0.1));
    lists.exp_avg_sqs.push_back(inputs.randn(shape, torch::kFloat32).square_().mul_(0.01));
    lists.steps.push_back(torch::full({}, 3.0, torch::dtype(torch::kFloat32).device(device)));
  }
  lists.copies = {torch::empty({64, 96}, torch::dtype(half).device(device)), torch::Tensor()};
  const auto clone_all = [](const AdamWTensorLists& from) {
    AdamWTensorLists to = from;
    for (auto* list : {&to.params, &to.exp_avgs, &to.exp_avg_sqs, &to.copies}) {
      for (auto& t : *list) t = t.defined() ? t.clone() : t;
    }
    return to;
  };
  const AdamWSettings settings{0.9, 0.95, 0.1, 1e-8};
  const auto before = clone_all(lists);
  auto want = clone_all(lists);
  const auto no_inf = torch::zeros({}, torch::dtype(torch::kFloat32).device(device));
  fused_adamw(lists, settings, 1e-3, no_inf);
  fused_adamw_reference(want, settings, 1e-3, no_inf);
  for (size_t i = 0; i < lists.params.size(); ++i) {
    const auto name = fmt::format("AdamW kernel, parameter {}", i);
    // The updates, not the weights: a wrong update hides in a weight a thousand times larger.
    errors.add(require_close(name + ": update", lists.params[i] - before.params[i],
                             want.params[i] - before.params[i], kFloat32Tolerance));
    errors.add(require_close(name + ": first moment", lists.exp_avgs[i], want.exp_avgs[i],
                             kFloat32Tolerance));
    errors.add(require_close(name + ": second moment", lists.exp_avg_sqs[i], want.exp_avg_sqs[i],
                             kFloat32Tolerance));
  }
  // The copy is the stepped weight rounded once to the half dtype.
  errors.add(require_close("AdamW kernel: half copy", lists.copies[0],
                           lists.params[0].to(half), 0.0));
  // A step with found_inf set writes nothing.
  const auto stepped = clone_all(lists);
  fused_adamw(lists, settings, 1e-3, torch::ones_like(no_inf));
  for (auto [got, kept] : {std::pair{lists.params[0], stepped.params[0]},
                           std::pair{lists.exp_avg_sqs[1], stepped.exp_avg_sqs[1]},
                           std::pair{lists.copies[0], stepped.copies[0]}}) {
    require_close("AdamW kernel: a skipped step", got, kept, 0.0);
  }
  return errors.text();
}

std::string check_dequantize(const c10::Device& device) {
  Inputs inputs(device);
  Errors errors;
  // 301 blocks of 64 values, the last of 37 (an odd count: half its last byte unused), so two
  // absmax2 blocks. Any bytes are a weight: random codes read every table entry.
  const int64_t numel = 64 * 300 + 37;
  const Nf4Codes nf4{inputs.bytes((numel + 1) / 2, 0, 256, torch::kUInt8),
                     inputs.bytes(301, 0, 256, torch::kUInt8),
                     inputs.randn({2}, torch::kFloat32).abs(), 0.03f, numel};
  const auto scales = inputs.randn({48}, torch::kFloat32).abs();
  const auto int8 = inputs.bytes(48 * 96, -127, 128, torch::kChar).view({48, 96});
  const auto e4m3 = inputs.randn({48, 96}, torch::kFloat32).mul(64).to(c10::kFloat8_e4m3fn);
  // Each value is one fp32 multiply rounded once, in the kernel as in ATen: equal bit for bit.
  for (const auto dtype : {torch::kFloat32, half_dtype(device)}) {
    const std::string in = c10::toString(dtype);
    errors.add(require_close("nf4 dequantize kernel in " + in, dequantize_nf4(nf4, dtype),
                             dequantize_nf4_reference(nf4, dtype), 0.0));
    for (const auto& values : {int8, e4m3}) {
      errors.add(require_close(
          fmt::format("{} dequantize kernel in {}", c10::toString(values.scalar_type()), in),
          dequantize_rows(values, scales, dtype),
          dequantize_rows_reference(values, scales, dtype), 0.0));
    }
  }
  return errors.text();
}

}  // namespace ampt::kernels
