// Host entry points of the CUDA kernels in this folder, on raw pointers: no torch headers, so the
// .cu files compile quickly with nvcc and the callers (../*.cpp) pass tensors' data pointers.
#pragma once

#include <cstdint>

namespace ampt::kernels::cuda {

enum class Dtype { float32, bfloat16, float16 };

// Per row r of `logits` [rows, cols] (row-major, `dtype`): the cross-entropy of its first
// `valid` columns against targets[r] into row_loss[r] (0 where targets[r] == ignore_index), and,
// when `write_grad`, the row replaced in place by softmax(row[:valid]) - onehot(target) with the
// padded columns and ignored rows zeroed: the gradient of the row's loss. One read of the logits
// and one write, as llm.c's fused_classifier.
void softmax_cross_entropy(void* logits, Dtype dtype, int64_t rows, int64_t cols, int64_t valid,
                           const int64_t* targets, int64_t ignore_index, float* row_loss,
                           bool write_grad, void* stream);

// y = LayerNorm(x + residual) with h = x + residual written out too (the next residual), one
// pass per row of `width`: x, residual and h in `dtype`, weight and bias fp32, y in `y_dtype`,
// mean and rstd (fp32, [rows]) kept for backward.
void add_layer_norm_forward(const void* x, const void* residual, Dtype dtype, const float* weight,
                            const float* bias, void* h, void* y, Dtype y_dtype, float* mean,
                            float* rstd, int64_t rows, int64_t width, double eps, void* stream);

// Backward of add_layer_norm_forward for one row each: dx = dh + LayerNormBackward(dy) (the
// gradient of both x and residual), and per-block partial sums of dweight and dbias
// (`partial_dweight`, `partial_dbias` [blocks, width] fp32) that the caller sums over blocks.
// Returns the number of blocks used.
int64_t add_layer_norm_backward(const void* dy, Dtype dy_dtype, const void* dh, const void* h,
                                Dtype dtype, const float* weight, const float* mean,
                                const float* rstd, void* dx, float* partial_dweight,
                                float* partial_dbias, int64_t rows, int64_t width, void* stream);

}  // namespace ampt::kernels::cuda
