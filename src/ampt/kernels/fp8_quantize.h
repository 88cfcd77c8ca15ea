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

// Quantises x (2-D, float32, bfloat16 or float16) with `scale` (0-dim float32 on x's device)
// into the copies asked for, saturating at ±format.max(). With `history`, its bookkeeping in the
// same pass: amax(x) enters the ring, last_scale ← scale (which may be history->scale itself),
// and history->scale ← max_over_headroom / (ring maximum, or amax(x)) when that is finite and
// positive, else unchanged. `want_column_sums`: x's column sums in float32 too, in the same pass
// on CUDA (a bias's gradient from the output gradient being quantised); on the ATen path
// x.sum(0) with dtype float32. `use_kernel` false forces the ATen path (tests compare the two).
Fp8Cast cast_fp8(const torch::Tensor& x, const torch::Tensor& scale, const Fp8Format& format,
                 bool want_data, bool want_transposed, Fp8History* history,
                 bool use_kernel = true, bool want_column_sums = false);

// Current scaling's first pass: scale ← max_over_headroom / amax(x) when finite and positive,
// else unchanged; amax_out (0-dim float32, optional) ← amax(x). `scratch` as in Fp8History.
void scale_from_amax(const torch::Tensor& x, const torch::Tensor& scale, const Fp8Format& format,
                     const torch::Tensor& amax_out, const torch::Tensor& scratch,
                     bool use_kernel = true);

// Row-wise scaling (TorchAO's rowwise recipe): data with one scale per row of x, transposed with
// one per column of x, each the largest power of two not above max_over_headroom / that row's
// or column's amax (1 when that is not finite and positive), so dequantising is exact. Two passes
// over x on CUDA: the amaxes, then both copies.
Fp8Cast cast_fp8_rowwise(const torch::Tensor& x, const Fp8Format& format, bool use_kernel = true);

}  // namespace ampt::kernels
