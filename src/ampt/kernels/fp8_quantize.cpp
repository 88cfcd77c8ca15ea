#include "ampt/kernels/fp8_quantize.h"

#include "ampt/kernels/cuda_dtype.h"
#include "ampt/kernels/kernel_support.h"

#include <c10/core/DeviceGuard.h>

#include <cmath>

namespace ampt::kernels {
namespace {

abi::Fp8Dtype kernel_fp8(c10::ScalarType dtype) {
  return dtype == c10::kFloat8_e5m2 ? abi::Fp8Dtype::e5m2 : abi::Fp8Dtype::e4m3;
}

// The backend of the kernels on x's device: kernel_takes(x) said they run there.
const KernelBackend& fp8_backend(const torch::Tensor& x) {
  return *kernels_for(FusedPath::fp8_casts, x.device());
}

// What the CUDA kernels take: a non-empty contiguous 2-D float32/bfloat16/float16 CUDA tensor,
// 16-byte aligned, whose sides are multiples of 16 (the fp8 GEMMs need that anyway) and whose
// rows fit the launch grid (64 a block along gridDim.y, at most 65535 blocks), on a GPU the
// kernels run on (kernel_support.h).
bool kernel_takes(const torch::Tensor& x) {
  const auto t = x.scalar_type();
  return x.dim() == 2 && x.is_contiguous() && x.numel() > 0 &&
         x.size(0) % 16 == 0 && x.size(1) % 16 == 0 && x.size(0) <= 64 * int64_t{65535} &&
         reinterpret_cast<std::uintptr_t>(x.data_ptr()) % 16 == 0 &&
         (t == c10::kFloat || t == c10::kBFloat16 || t == c10::kHalf) &&
         kernels_for(FusedPath::fp8_casts, x.device()) != nullptr;
}

// And a gradient prologue's `pre` alike, of x's shape, dtype and device.
bool kernel_takes(const torch::Tensor& x, const Fp8CastSpec& spec) {
  if (!kernel_takes(x)) return false;
  if (spec.prologue != Fp8CastSpec::Prologue::gelu_tanh_grad) return true;
  return kernel_takes(spec.pre) && spec.pre.sizes() == x.sizes() &&
         spec.pre.scalar_type() == x.scalar_type() && spec.pre.device() == x.device();
}

abi::Fp8Input kernel_input(const torch::Tensor& x, const Fp8CastSpec& spec) {
  using P = Fp8CastSpec::Prologue;
  const auto prologue = spec.prologue == P::gelu_tanh        ? abi::Fp8Prologue::gelu_tanh
                        : spec.prologue == P::gelu_tanh_grad ? abi::Fp8Prologue::gelu_tanh_grad
                                                             : abi::Fp8Prologue::none;
  return {x.data_ptr(), cuda_dtype(x.scalar_type()), prologue,
          prologue == abi::Fp8Prologue::gelu_tanh_grad ? spec.pre.data_ptr() : nullptr};
}

float max_over_headroom(const Fp8Format& format) {
  return static_cast<float>(format.max_over_headroom());
}

// max_over_headroom / amax in float32, as the kernels divide.
torch::Tensor scale_for(const torch::Tensor& amax, const Fp8Format& format) {
  return torch::full_like(amax, max_over_headroom(format)).div_(amax);
}

torch::Tensor usable(const torch::Tensor& scale) { return scale.isfinite().logical_and_(scale.gt(0)); }

torch::Tensor amax_of(const torch::Tensor& x) { return x.abs().amax().to(torch::kFloat32); }

// round(clamp(x · scale, ±max)) in the format's dtype; `scale` broadcasts (0-dim, a column or a
// row).
torch::Tensor quantize(const torch::Tensor& x, const torch::Tensor& scale, const Fp8Format& format) {
  const double max = format.max();
  return (x.to(torch::kFloat32) * scale).clamp_(-max, max).to(format.dtype);
}

// The largest power of two not above each usable scale (its exponent bits alone), else 1.
torch::Tensor power_of_two(const torch::Tensor& scale) {
  const auto floor = scale.view(torch::kInt32).bitwise_and(0x7f800000).view(torch::kFloat32);
  return torch::where(usable(scale), floor, torch::ones_like(scale));
}

void record(Fp8History& history, const torch::Tensor& scale, const torch::Tensor& amax,
            const Fp8Format& format) {
  history.last_scale.copy_(scale);
  history.newest.add_(1).remainder_(history.amaxes.size(0));
  history.amaxes.scatter_(0, history.newest.to(torch::kInt64).view({1}), amax.view({1}));
  const auto next = scale_for(history.use_max ? history.amaxes.amax() : amax, format);
  history.scale.copy_(torch::where(usable(next), next, history.scale));
}

Fp8Cast cast_with_aten(const torch::Tensor& x, const torch::Tensor& scale, const Fp8Format& format,
                       const Fp8CastSpec& spec, Fp8History* history) {
  const auto v = fp8_cast_values(x, spec);
  const auto q = quantize(v, scale, format);
  Fp8Cast out;
  if (spec.data) out.data = q;
  if (spec.transposed) out.transposed = q.t().contiguous();
  out.inverse = scale.reciprocal();
  out.transposed_inverse = out.inverse;
  if (spec.column_sums) out.column_sums = v.sum(0, /*keepdim=*/false, torch::kFloat32);
  if (history) record(*history, scale, amax_of(v), format);
  return out;
}

Fp8Cast cast_with_kernel(const torch::Tensor& x, const torch::Tensor& scale,
                         const Fp8Format& format, const Fp8CastSpec& spec, Fp8History* history) {
  const c10::DeviceGuard guard(x.device());
  const auto& kernels = fp8_backend(x);
  const int64_t rows = x.size(0), cols = x.size(1);
  const auto fp8 = x.options().dtype(format.dtype);
  const auto f32 = x.options().dtype(torch::kFloat32);
  Fp8Cast out;
  if (spec.data) out.data = torch::empty({rows, cols}, fp8);
  if (spec.transposed) out.transposed = torch::empty({cols, rows}, fp8);
  out.inverse = torch::empty({}, f32);
  out.transposed_inverse = out.inverse;
  torch::Tensor partials;
  if (spec.column_sums) partials = torch::empty({kernels.fp8_column_partial_rows(rows), cols}, f32);
  abi::Fp8ScaleUpdate update{};
  if (history) {
    update = {history->scale.data_ptr<float>(),
              history->last_scale.data_ptr<float>(),
              history->amaxes.data_ptr<float>(),
              history->newest.data_ptr<int32_t>(),
              history->amaxes.size(0),
              history->use_max,
              max_over_headroom(format),
              reinterpret_cast<uint32_t*>(history->scratch.data_ptr<int32_t>())};
  }
  kernels.fp8_cast_transpose(kernel_input(x, spec), rows, cols, scale.data_ptr<float>(),
                             kernel_fp8(format.dtype), spec.data ? out.data.data_ptr() : nullptr,
                             spec.transposed ? out.transposed.data_ptr() : nullptr,
                             out.inverse.data_ptr<float>(),
                             spec.column_sums ? partials.data_ptr<float>() : nullptr,
                             history ? &update : nullptr, kernels.stream(x.device()));
  if (spec.column_sums) out.column_sums = partials.sum(0);  // a fixed order: deterministic
  return out;
}

}  // namespace

double Fp8Format::max() const { return dtype == c10::kFloat8_e5m2 ? 57344.0 : 448.0; }

double Fp8Format::max_over_headroom() const {
  return max() / std::ldexp(1.0, static_cast<int>(margin));
}

Fp8History Fp8History::zeros(int64_t len, bool use_max, const torch::Device& device) {
  const auto f32 = torch::dtype(torch::kFloat32).device(device);
  const auto i32 = torch::dtype(torch::kInt32).device(device);
  // The first amax goes to slot 0.
  return {torch::ones({}, f32), torch::ones({}, f32), torch::zeros({len}, f32),
          torch::full({}, static_cast<int32_t>(len - 1), i32), torch::zeros({2}, i32), use_max};
}

torch::Tensor Fp8History::ordered() const {
  return amaxes.roll(-newest.item<int64_t>());
}

torch::Tensor fp8_cast_values(const torch::Tensor& x, const Fp8CastSpec& spec) {
  switch (spec.prologue) {
    case Fp8CastSpec::Prologue::none: break;
    case Fp8CastSpec::Prologue::gelu_tanh: return at::gelu(x.to(torch::kFloat32), "tanh");
    case Fp8CastSpec::Prologue::gelu_tanh_grad:
      return at::gelu_backward(x.to(torch::kFloat32), spec.pre.to(torch::kFloat32), "tanh");
  }
  return x;
}

Fp8Cast cast_fp8(const torch::Tensor& x, const torch::Tensor& scale, const Fp8Format& format,
                 const Fp8CastSpec& spec, Fp8History* history, bool use_kernel) {
  if (use_kernel && kernel_takes(x, spec)) return cast_with_kernel(x, scale, format, spec, history);
  return cast_with_aten(x, scale, format, spec, history);
}

void scale_from_amax(const torch::Tensor& x, const torch::Tensor& scale, const Fp8Format& format,
                     const torch::Tensor& amax_out, const torch::Tensor& scratch,
                     const Fp8CastSpec& spec, bool use_kernel) {
  if (use_kernel && kernel_takes(x, spec)) {
    const c10::DeviceGuard guard(x.device());
    const auto& kernels = fp8_backend(x);
    kernels.fp8_scale_from_amax(kernel_input(x, spec), x.numel(), max_over_headroom(format),
                                scale.data_ptr<float>(),
                                amax_out.defined() ? amax_out.data_ptr<float>() : nullptr,
                                reinterpret_cast<uint32_t*>(scratch.data_ptr<int32_t>()),
                                kernels.stream(x.device()));
    return;
  }
  const auto amax = amax_of(fp8_cast_values(x, spec));
  const auto next = scale_for(amax, format);
  scale.copy_(torch::where(usable(next), next, scale));
  if (amax_out.defined()) amax_out.copy_(amax);
}

Fp8Cast cast_fp8_rowwise(const torch::Tensor& x, const Fp8Format& format, bool use_kernel) {
  const int64_t rows = x.size(0), cols = x.size(1);
  if (!use_kernel || !kernel_takes(x)) {
    const auto magnitude = x.to(torch::kFloat32).abs();
    const auto row_scale = power_of_two(scale_for(magnitude.amax(1), format));
    const auto col_scale = power_of_two(scale_for(magnitude.amax(0), format));
    return {quantize(x, row_scale.unsqueeze(1), format),
            quantize(x, col_scale.unsqueeze(0), format).t().contiguous(), row_scale.reciprocal(),
            col_scale.reciprocal(), torch::Tensor()};
  }
  const c10::DeviceGuard guard(x.device());
  const auto& kernels = fp8_backend(x);
  const auto amaxes = torch::zeros({rows + cols}, x.options().dtype(torch::kInt32));
  auto* row_amax = reinterpret_cast<uint32_t*>(amaxes.data_ptr<int32_t>());
  kernels.fp8_rowwise_amax(x.data_ptr(), cuda_dtype(x.scalar_type()), rows, cols, row_amax,
                           row_amax + rows, kernels.stream(x.device()));
  const auto fp8 = x.options().dtype(format.dtype);
  const auto f32 = x.options().dtype(torch::kFloat32);
  Fp8Cast out{torch::empty({rows, cols}, fp8), torch::empty({cols, rows}, fp8),
              torch::empty({rows}, f32), torch::empty({cols}, f32), torch::Tensor()};
  kernels.fp8_rowwise_cast_transpose(
      x.data_ptr(), cuda_dtype(x.scalar_type()), rows, cols, row_amax, row_amax + rows,
      max_over_headroom(format), kernel_fp8(format.dtype), out.data.data_ptr(),
      out.transposed.data_ptr(), out.inverse.data_ptr<float>(),
      out.transposed_inverse.data_ptr<float>(), kernels.stream(x.device()));
  return out;
}

}  // namespace ampt::kernels
