// Host entry points of the CUDA kernels in this folder, on raw pointers: no torch headers, so the
// .cu files compile quickly with nvcc and the callers (../*.cpp) pass tensors' data pointers.
#pragma once

#include "ampt/kernels/kernel_abi.h"

#include <cstdint>

namespace ampt::kernels::cuda {

using abi::AdamWHyper;
using abi::AdamWTensors;
using abi::AddLayerNormLayout;
using abi::Dtype;
using abi::Fp8Dtype;
using abi::Fp8Input;
using abi::Fp8Prologue;
using abi::Fp8ScaleUpdate;
using abi::KernelImage;
using abi::kNf4AbsmaxBlock;
using abi::kNf4Block;
using abi::Nf4Input;
using abi::RowCode;

// The image of each kernel file on the current device. Nothing is launched; the file's kernels
// are loaded, as the first launch would.
KernelImage softmax_cross_entropy_image();
KernelImage add_layer_norm_image();
KernelImage fp8_quantize_image();
KernelImage adamw_image();
KernelImage dequantize_image();

// Per row r of `logits` [rows, cols] (row-major, `dtype`): the cross-entropy of its first
// `valid` columns against targets[r] into row_loss[r] (0 where targets[r] == ignore_index), and,
// when `write_grad`, the row replaced in place by softmax(row[:valid]) - onehot(target) with the
// padded columns and ignored rows zeroed: the gradient of the row's loss. One read of the logits
// and one write, as llm.c's fused_classifier.
void softmax_cross_entropy(void* logits, Dtype dtype, int64_t rows, int64_t cols, int64_t valid,
                           const int64_t* targets, int64_t ignore_index, float* row_loss,
                           bool write_grad, void* stream);

// Rows of `cols` elements (all row-major, contiguous): sum ← residual + branch (rounded to the
// residual's type), normed ← (sum − mean) · rstd · weight + bias, with the row's mean and
// rstd = 1/sqrt(biased variance + eps) into mean[rows] and rstd[rows].
void add_layer_norm_forward(AddLayerNormLayout layout, const void* residual, const void* branch,
                            const float* weight, const float* bias, int64_t rows, int64_t cols,
                            float eps, void* sum, void* normed, float* mean, float* rstd,
                            void* stream);

// The float32 rows of `partial` add_layer_norm_backward needs: [chunks, 2, cols].
int64_t add_layer_norm_grad_chunks(int64_t rows);

// The gradient of the sum, d_sum (null: none) + layer norm's backward of d_normed, into
// d_residual (the stream's type) and, when not null, d_branch (the branch's type); per chunk of
// rows, Σ d_normed · xhat and Σ d_normed per column into partial[chunk][0] and [chunk][1], for
// the caller to sum over chunks (the weight's and bias's gradients).
void add_layer_norm_backward(AddLayerNormLayout layout, const void* sum, const void* d_normed,
                             const void* d_sum, const float* weight, const float* mean,
                             const float* rstd, int64_t rows, int64_t cols, void* d_residual,
                             void* d_branch, float* partial, void* stream);

// The rows of fp8_cast_transpose's column_partials for x of `rows` rows: one per 64 rows.
int64_t fp8_column_partial_rows(int64_t rows);

// One read of x (and its `pre`), v = the prologue's values: `out` [rows, cols] ← fp8(v · *scale)
// and `out_t` [cols, rows] ← its transpose (either may be null), saturating to the format's
// largest finite value, rounding to nearest even; `*inverse` ← 1 / *scale; unless null,
// `column_partials` [fp8_column_partial_rows(rows), cols] (float32) ← the sums of v's columns
// over each 64 rows, for the caller to sum (a bias's gradient); with `update`, its bookkeeping
// too, of amax(v).
void fp8_cast_transpose(const Fp8Input& x, int64_t rows, int64_t cols, const float* scale,
                        Fp8Dtype out_dtype, void* out, void* out_t, float* inverse,
                        float* column_partials, const Fp8ScaleUpdate* update, void* stream);

// Current scaling's first pass over x (`n` elements, a multiple of 16, 16-byte aligned), v its
// prologue's values: `*scale` ← max_over_headroom / amax(v) when finite and positive, else
// unchanged; `*amax_out` ← amax(v) unless null. `scratch` as in Fp8ScaleUpdate.
void fp8_scale_from_amax(const Fp8Input& x, int64_t n, float max_over_headroom, float* scale,
                         float* amax_out, uint32_t* scratch, void* stream);

// Row-wise scaling's first pass: the bits of each row's and each column's amax of x [rows, cols]
// into row_amax [rows] and col_amax [cols] (atomic maxima: both zero beforehand).
void fp8_rowwise_amax(const void* x, Dtype dtype, int64_t rows, int64_t cols, uint32_t* row_amax,
                      uint32_t* col_amax, void* stream);

// Row-wise scaling's second pass: `out` ← fp8(x · s_row) with one scale per row and `out_t` ←
// fp8(xᵀ · s_col) with one per column of x, each s the largest power of two not above
// max_over_headroom / amax (1 when that is not finite and positive); row_inverse [rows] and
// col_inverse [cols] ← 1 / s.
void fp8_rowwise_cast_transpose(const void* x, Dtype dtype, int64_t rows, int64_t cols,
                                const uint32_t* row_amax, const uint32_t* col_amax,
                                float max_over_headroom, Fp8Dtype out_dtype, void* out,
                                void* out_t, float* row_inverse, float* col_inverse, void* stream);

// A frozen weight's storage back to dense values in `dtype`, each one fp32 multiply rounded
// once, as the ATen path (../dequantize.h) computes it: `out` [weight.numel] ← the NormalFloat
// value of each code times its block's absmax (dynamic_map[code] · absmax2 + offset).
void dequantize_nf4(const Nf4Input& weight, Dtype dtype, void* out, void* stream);

// `out` [rows, cols] ← each one-byte value of `values` [rows, cols] (int8, or e4m3's bits) times
// its row's scale.
void dequantize_rows(const void* values, RowCode code, const float* scales, int64_t rows,
                     int64_t cols, Dtype dtype, void* out, void* stream);

// One AdamW step (abi::AdamWTensors) of each tensor listed, skipped whole when *found_inf is 1:
// each parameter, its two moments and, where one is given, its half copy, in one pass.
void adamw(const AdamWTensors& tensors, const AdamWHyper& hyper, void* stream);

}  // namespace ampt::kernels::cuda
