// A warp per row for the row-wise passes (a GPT's rows are a few thousand elements: the second and
// third reads of a row come from L1/L2, as in llm.c's layernorm kernels). The weight and bias
// gradients are summed over rows in a fixed order: per block of rows into `partial`, and the
// caller sums the blocks, so the result is deterministic.
#include "ampt/kernels/cuda/element.cuh"
#include "ampt/kernels/cuda/launch.h"

#include <algorithm>
#include <type_traits>

namespace ampt::kernels::cuda {
namespace {

constexpr int kRowThreads = 256;  // 8 warps, 8 rows a block
constexpr int kWarps = kRowThreads / 32;

__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffff, v, offset);
  return v;
}

// S: the residual stream's dtype (residual and sum); B: the branch's; O: normed's.
template <class S, class B, class O>
__global__ void add_layer_norm_forward_kernel(const S* residual, const B* branch,
                                              const float* weight, const float* bias, int64_t rows,
                                              int64_t cols, float eps, S* sum, O* normed,
                                              float* mean_out, float* rstd_out) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const int64_t base = row * cols;
  float total = 0.0f;
  for (int64_t c = lane; c < cols; c += 32) {
    // Rounded to the stream's dtype first: the statistics are those of the sum as stored.
    const S s = from_float<S>(to_float(residual[base + c]) + to_float(branch[base + c]));
    sum[base + c] = s;
    total += to_float(s);
  }
  const float mean = warp_sum(total) / static_cast<float>(cols);
  float squares = 0.0f;
  for (int64_t c = lane; c < cols; c += 32) {
    const float d = to_float(sum[base + c]) - mean;
    squares += d * d;
  }
  const float rstd = rsqrtf(warp_sum(squares) / static_cast<float>(cols) + eps);
  for (int64_t c = lane; c < cols; c += 32) {
    const float xhat = (to_float(sum[base + c]) - mean) * rstd;
    normed[base + c] = from_float<O>(xhat * weight[c] + bias[c]);
  }
  if (lane == 0) {
    mean_out[row] = mean;
    rstd_out[row] = rstd;
  }
}

// d_sum[c] + layer norm's input gradient, into the residual's and (when distinct) the branch's
// gradient.
template <class S, class B, class O>
__global__ void add_layer_norm_input_grad_kernel(const S* sum, const O* d_normed, const S* d_sum,
                                                 const float* weight, const float* mean_in,
                                                 const float* rstd_in, int64_t rows, int64_t cols,
                                                 S* d_residual, B* d_branch) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const int64_t base = row * cols;
  const float mean = mean_in[row], rstd = rstd_in[row];
  float dxhat_total = 0.0f, dxhat_xhat_total = 0.0f;
  for (int64_t c = lane; c < cols; c += 32) {
    const float xhat = (to_float(sum[base + c]) - mean) * rstd;
    const float dxhat = to_float(d_normed[base + c]) * weight[c];
    dxhat_total += dxhat;
    dxhat_xhat_total += dxhat * xhat;
  }
  const float n = static_cast<float>(cols);
  const float dxhat_mean = warp_sum(dxhat_total) / n;
  const float dxhat_xhat_mean = warp_sum(dxhat_xhat_total) / n;
  for (int64_t c = lane; c < cols; c += 32) {
    const float xhat = (to_float(sum[base + c]) - mean) * rstd;
    const float dxhat = to_float(d_normed[base + c]) * weight[c];
    float g = rstd * (dxhat - dxhat_mean - xhat * dxhat_xhat_mean);
    if (d_sum != nullptr) g += to_float(d_sum[base + c]);
    d_residual[base + c] = from_float<S>(g);
    if (d_branch != nullptr) d_branch[base + c] = from_float<B>(g);
  }
}

// Block (x: 32 columns, y: 8 row lanes) over a tile of 32 columns and a chunk of rows:
// partial[chunk][0][c] = Σ d_normed·xhat, partial[chunk][1][c] = Σ d_normed over the chunk.
template <class S, class O>
__global__ void add_layer_norm_param_grad_kernel(const S* sum, const O* d_normed,
                                                 const float* mean_in, const float* rstd_in,
                                                 int64_t rows, int64_t cols, int64_t rows_per_chunk,
                                                 float* partial) {
  __shared__ float shared[2][8][33];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x;
  const int64_t first = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t last = first + rows_per_chunk < rows ? first + rows_per_chunk : rows;
  float dweight = 0.0f, dbias = 0.0f;
  if (c < cols) {
    for (int64_t r = first + threadIdx.y; r < last; r += blockDim.y) {
      const float dy = to_float(d_normed[r * cols + c]);
      dweight += dy * (to_float(sum[r * cols + c]) - mean_in[r]) * rstd_in[r];
      dbias += dy;
    }
  }
  shared[0][threadIdx.y][threadIdx.x] = dweight;
  shared[1][threadIdx.y][threadIdx.x] = dbias;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    for (int y = 1; y < blockDim.y; ++y) {
      dweight += shared[0][y][threadIdx.x];
      dbias += shared[1][y][threadIdx.x];
    }
    float* out = partial + static_cast<int64_t>(blockIdx.y) * 2 * cols;
    out[c] = dweight;
    out[cols + c] = dbias;
  }
}

dim3 row_grid(int64_t rows) { return dim3(static_cast<unsigned>((rows + kWarps - 1) / kWarps)); }

// Calls `launch` with null pointers of the three element types of `layout`.
template <class Launch>
void dispatch(AddLayerNormLayout layout, Launch&& launch) {
  switch (layout) {
    case AddLayerNormLayout::f32_f32_f32:
      return launch(static_cast<float*>(nullptr), static_cast<float*>(nullptr),
                    static_cast<float*>(nullptr));
    case AddLayerNormLayout::f32_bf16_bf16:
      return launch(static_cast<float*>(nullptr), static_cast<__nv_bfloat16*>(nullptr),
                    static_cast<__nv_bfloat16*>(nullptr));
    case AddLayerNormLayout::f32_f16_f16:
      return launch(static_cast<float*>(nullptr), static_cast<__half*>(nullptr),
                    static_cast<__half*>(nullptr));
    case AddLayerNormLayout::bf16_bf16_bf16:
      return launch(static_cast<__nv_bfloat16*>(nullptr), static_cast<__nv_bfloat16*>(nullptr),
                    static_cast<__nv_bfloat16*>(nullptr));
    case AddLayerNormLayout::f16_f16_f16:
      return launch(static_cast<__half*>(nullptr), static_cast<__half*>(nullptr),
                    static_cast<__half*>(nullptr));
  }
}

}  // namespace

KernelImage add_layer_norm_image() {
  return image_of(add_layer_norm_forward_kernel<float, float, float>, 0);
}

void add_layer_norm_forward(AddLayerNormLayout layout, const void* residual, const void* branch,
                            const float* weight, const float* bias, int64_t rows, int64_t cols,
                            float eps, void* sum, void* normed, float* mean, float* rstd,
                            void* stream) {
  if (rows == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  dispatch(layout, [&](auto* stream_type, auto* branch_type, auto* normed_type) {
    using S = std::remove_pointer_t<decltype(stream_type)>;
    using B = std::remove_pointer_t<decltype(branch_type)>;
    using O = std::remove_pointer_t<decltype(normed_type)>;
    add_layer_norm_forward_kernel<S, B, O><<<row_grid(rows), kRowThreads, 0, s>>>(
        static_cast<const S*>(residual), static_cast<const B*>(branch), weight, bias, rows, cols,
        eps, static_cast<S*>(sum), static_cast<O*>(normed), mean, rstd);
  });
  check_launch("add_layer_norm forward kernel launch");
}

int64_t add_layer_norm_grad_chunks(int64_t rows) {
  // Enough blocks to fill the GPU with a few column tiles; at least 64 rows a chunk.
  return std::max<int64_t>(1, std::min<int64_t>(128, rows / 64));
}

void add_layer_norm_backward(AddLayerNormLayout layout, const void* sum, const void* d_normed,
                             const void* d_sum, const float* weight, const float* mean,
                             const float* rstd, int64_t rows, int64_t cols, void* d_residual,
                             void* d_branch, float* partial, void* stream) {
  if (rows == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  const int64_t chunks = add_layer_norm_grad_chunks(rows);
  const int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  dispatch(layout, [&](auto* stream_type, auto* branch_type, auto* normed_type) {
    using S = std::remove_pointer_t<decltype(stream_type)>;
    using B = std::remove_pointer_t<decltype(branch_type)>;
    using O = std::remove_pointer_t<decltype(normed_type)>;
    add_layer_norm_input_grad_kernel<S, B, O><<<row_grid(rows), kRowThreads, 0, s>>>(
        static_cast<const S*>(sum), static_cast<const O*>(d_normed), static_cast<const S*>(d_sum),
        weight, mean, rstd, rows, cols, static_cast<S*>(d_residual), static_cast<B*>(d_branch));
    check_launch("add_layer_norm input-gradient kernel launch");
    const dim3 grid(static_cast<unsigned>((cols + 31) / 32), static_cast<unsigned>(chunks));
    add_layer_norm_param_grad_kernel<S, O><<<grid, dim3(32, 8), 0, s>>>(
        static_cast<const S*>(sum), static_cast<const O*>(d_normed), mean, rstd, rows, cols,
        rows_per_chunk, partial);
  });
  check_launch("add_layer_norm parameter-gradient kernel launch");
}

}  // namespace ampt::kernels::cuda
