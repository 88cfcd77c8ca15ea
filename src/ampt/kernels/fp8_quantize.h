// fp8 quantisation of a 2-D tensor into the copies a Linear layer's three GEMMs read: the tensor
// row-major and its transpose, each with the factors that dequantise it. On CUDA one kernel reads
// the tensor once and writes both copies (and, for delayed scaling, records the amax and sets the
// next scale on the device: cuda/launch.h); elsewhere, and for shapes the kernel does not take,
// ATen ops compute the same values, which is also the reference the kernel's tests compare with.
#pragma once

#include <torch/types.h>

#include <cstdint>

namespace ampt::kernels {

// An fp8 format and its headroom: scales are max_over_headroom() / amax.
struct Fp8Format {
  c10::ScalarType dtype = c10::kFloat8_e4m3fn;  // or kFloat8_e5m2
  int64_t margin = 0;                           // headroom in powers of two
  double max() const;                           // 448 (e4m3fn) or 57344 (e5m2)
  double max_over_headroom() const;             // max() / 2^margin
};

// The fp8 copies of x [rows, cols]. data ≈ x / inverse; transposed ≈ xᵀ / transposed_inverse.
// Per-tensor scaling: both inverses are the same 0-dim tensor. Row-wise: inverse is [rows] (one
// per row of x) and transposed_inverse [cols] (one per row of xᵀ).
struct Fp8Cast {
  torch::Tensor data;                // [rows, cols], undefined when not asked for
  torch::Tensor transposed;          // [cols, rows], undefined when not asked for
  torch::Tensor inverse;             // float32
  torch::Tensor transposed_inverse;  // float32
  torch::Tensor column_sums;         // [cols] float32: x's, unscaled; undefined when not asked for
};

// Delayed scaling's state of one tensor, all on its device (TransformerEngine's amax history).
struct Fp8History {
  torch::Tensor scale;       // 0-dim float32: the scale the next recorded call uses
  torch::Tensor last_scale;  // 0-dim float32: the scale the latest recorded call used
  torch::Tensor amaxes;      // [len] float32, a ring
  torch::Tensor newest;      // 0-dim int32: the ring slot of the latest amax
  torch::Tensor scratch;     // [2] int32, zero between calls (the kernel's grid-wide reduction)
  bool use_max = true;       // next scale from the ring's maximum; false: the latest amax alone

  static Fp8History zeros(int64_t len, bool use_max, const torch::Device& device);
  // The ring in TransformerEngine's layout: [0] the latest amax, then the oldest to the newest.
  torch::Tensor ordered() const;
};

// What a cast makes, and what it applies to each element of x first: in float32 and in the same
// pass on CUDA, so that the amax, the copies and the column sums are of the result.
// TransformerEngine fuses the MLP's GELU into the cast of c_proj's input (gelu_tanh) and the
// GELU's gradient into the cast of c_fc's output gradient (gelu_tanh_grad: x · GELU'(pre), x
// the gradient of the GELU's output).
struct Fp8CastSpec {
  bool data = true;          // the row-major copy
  bool transposed = true;    // the transposed copy
  bool column_sums = false;  // float32 column sums of the values cast: a bias's gradient
  enum class Prologue { none, gelu_tanh, gelu_tanh_grad } prologue = Prologue::none;
  torch::Tensor pre{};  // gelu_tanh_grad: the GELU's input, of x's shape and dtype
};

// The values a cast with `spec` quantises, by ATen ops: x itself, or its prologue's result in
// float32 (at::gelu, at::gelu_backward with approximate "tanh").
torch::Tensor fp8_cast_values(const torch::Tensor& x, const Fp8CastSpec& spec);

// Quantises v = fp8_cast_values(x, spec) (x 2-D, float32, bfloat16 or float16) with `scale`
// (0-dim float32 on x's device) into what `spec` asks for, saturating at ±format.max(). With
// `history`, its bookkeeping in the same pass: amax(v) enters the ring, last_scale ← scale
// (which may be history->scale itself), and history->scale ← max_over_headroom / (ring maximum,
// or amax(v)) when that is finite and positive, else unchanged. `use_kernel` false forces the
// ATen path (tests compare the two).
Fp8Cast cast_fp8(const torch::Tensor& x, const torch::Tensor& scale, const Fp8Format& format,
                 const Fp8CastSpec& spec, Fp8History* history, bool use_kernel = true);

// Current scaling's first pass: scale ← max_over_headroom / amax(v) when finite and positive,
// else unchanged; amax_out (0-dim float32, optional) ← amax(v); v as in cast_fp8 (only the
// spec's prologue matters). `scratch` as in Fp8History.
void scale_from_amax(const torch::Tensor& x, const torch::Tensor& scale, const Fp8Format& format,
                     const torch::Tensor& amax_out, const torch::Tensor& scratch,
                     const Fp8CastSpec& spec = {}, bool use_kernel = true);

// Row-wise scaling (TorchAO's rowwise recipe): data with one scale per row of x, transposed with
// one per column of x, each the largest power of two not above max_over_headroom / that row's
// or column's amax (1 when that is not finite and positive), so dequantising is exact. Two passes
// over x on CUDA: the amaxes, then both copies.
Fp8Cast cast_fp8_rowwise(const torch::Tensor& x, const Fp8Format& format, bool use_kernel = true);

}  // namespace ampt::kernels
