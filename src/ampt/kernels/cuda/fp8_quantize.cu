// fp8 quantisation in as few passes over memory as the scaling allows. A block of 256 threads
// owns a 64 x 64 tile: each thread loads 16 consecutive elements of one row with 16-byte loads,
// stores their fp8 values as one 16-byte row-major store, and passes them through shared memory
// so that a second 16-byte store writes 16 consecutive elements of a transposed row (and, for a
// gradient whose bias needs its column sums, its values so that 64 threads sum the tile's
// columns: TransformerEngine's cast_transpose_dbias, one read instead of two). Amaxes are
// reduced per block and combined with atomic maxima on their bit patterns (non-negative floats
// order like their bits; a NaN's bits exceed infinity's, so a NaN propagates as in ATen's amax).
#include "ampt/kernels/cuda/element.cuh"
#include "ampt/kernels/cuda/launch.h"

#include <cuda_fp8.h>

#include <algorithm>
#include <type_traits>

namespace ampt::kernels::cuda {
namespace {

constexpr int kTile = 64;
constexpr int kThreads = 256;  // 64 rows x 4 segments of 16 columns
constexpr int kSegment = 16;

__device__ float nan_max(float a, float b) { return (a != a || a > b) ? a : b; }

__device__ void load16(const float* p, float (&v)[kSegment]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float4 f = reinterpret_cast<const float4*>(p)[i];
    v[4 * i] = f.x;
    v[4 * i + 1] = f.y;
    v[4 * i + 2] = f.z;
    v[4 * i + 3] = f.w;
  }
}

__device__ float2 to_float2(__nv_bfloat162 h) { return __bfloat1622float2(h); }
__device__ float2 to_float2(__half2 h) { return __half22float2(h); }

template <class Half2, class Half>
__device__ void load16_half(const Half* p, float (&v)[kSegment]) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const uint4 u = reinterpret_cast<const uint4*>(p)[i];
    const Half2* h = reinterpret_cast<const Half2*>(&u);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 f = to_float2(h[j]);
      v[8 * i + 2 * j] = f.x;
      v[8 * i + 2 * j + 1] = f.y;
    }
  }
}
__device__ void load16(const __nv_bfloat16* p, float (&v)[kSegment]) {
  load16_half<__nv_bfloat162>(p, v);
}
__device__ void load16(const __half* p, float (&v)[kSegment]) { load16_half<__half2>(p, v); }

// GPT-2's GELU, 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), and its derivative, in float32 as
// ATen's gelu and gelu_backward with approximate="tanh" compute them.
constexpr float kBeta = 0.7978845608028654f;  // √(2/π)
constexpr float kKappa = 0.044715f;
__device__ float gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanhf(kBeta * (x + kKappa * x * x * x)));
}
__device__ float gelu_tanh_derivative(float x) {
  const float x_sq = x * x;
  const float t = tanhf(kBeta * (x + kKappa * x_sq * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kBeta * (1.0f + 3.0f * kKappa * x_sq);
}

// The 16 values at element `offset` of x, with the prologue applied (launch.h's Fp8Prologue).
template <Fp8Prologue P, class In>
__device__ void load_values(const In* x, const In* pre, int64_t offset, float (&v)[kSegment]) {
  load16(x + offset, v);
  if constexpr (P == Fp8Prologue::gelu_tanh) {
#pragma unroll
    for (int j = 0; j < kSegment; ++j) v[j] = gelu_tanh(v[j]);
  } else if constexpr (P == Fp8Prologue::gelu_tanh_grad) {
    float p[kSegment];
    load16(pre + offset, p);
#pragma unroll
    for (int j = 0; j < kSegment; ++j) v[j] *= gelu_tanh_derivative(p[j]);
  }
}

template <Fp8Dtype D>
__device__ uint8_t to_fp8(float v) {
  return __nv_cvt_float_to_fp8(v, __NV_SATFINITE, D == Fp8Dtype::e4m3 ? __NV_E4M3 : __NV_E5M2);
}

__device__ uint4 pack16(const uint8_t (&q)[kSegment]) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    w[i] = q[4 * i] | (q[4 * i + 1] << 8) | (q[4 * i + 2] << 16) | (uint32_t(q[4 * i + 3]) << 24);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// The maximum over the block, in thread 0. Starts with a barrier so that it can be called twice.
__device__ float block_max(float m) {
  __shared__ float warp_max[kThreads / 32];
  __syncthreads();
  for (int offset = 16; offset > 0; offset >>= 1) {
    m = nan_max(m, __shfl_xor_sync(0xffffffff, m, offset));
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_max[warp] = m;
  __syncthreads();
  if (warp == 0) {
    m = lane < kThreads / 32 ? warp_max[lane] : 0.0f;
    for (int offset = 16; offset > 0; offset >>= 1) {
      m = nan_max(m, __shfl_xor_sync(0xffffffff, m, offset));
    }
  }
  return m;
}

// Adds this block's amax `m` to scratch[0]; true in every thread of the block that finished last,
// which gets the amax of the whole grid in `amax` and leaves scratch zero for the next call.
__device__ bool finish_amax(float m, uint32_t* scratch, float& amax) {
  __shared__ bool is_last;
  __shared__ float total;
  m = block_max(m);
  if (threadIdx.x == 0) {
    atomicMax(&scratch[0], __float_as_uint(m));
    __threadfence();
    is_last = atomicAdd(&scratch[1], 1u) == gridDim.x * gridDim.y - 1;
    if (is_last) {
      total = __uint_as_float(atomicExch(&scratch[0], 0u));
      scratch[1] = 0;
    }
  }
  __syncthreads();
  amax = total;
  return is_last;
}

__device__ bool usable(float scale) { return isfinite(scale) && scale > 0.0f; }

// The largest power of two not above max_over_headroom / amax; 1 when that is unusable.
__device__ float power_of_two_scale(float max_over_headroom, uint32_t amax_bits) {
  const float s = max_over_headroom / __uint_as_float(amax_bits);
  return usable(s) ? __uint_as_float(__float_as_uint(s) & 0x7f800000u) : 1.0f;
}

// Where a thread's 16 elements lie: row `row`, columns col..col+15 of x.
struct Segment {
  int64_t row, col;
  bool inside;
};
__device__ Segment segment_of(int64_t rows, int64_t cols) {
  const int64_t row = static_cast<int64_t>(blockIdx.y) * kTile + threadIdx.x / 4;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kTile + (threadIdx.x % 4) * kSegment;
  return {row, col, row < rows && col < cols};
}

using Tile = uint8_t[kTile][kTile + 4];  // 4 bytes of padding spread a column over the banks

__device__ void put_in_tile(Tile& tile, const uint8_t (&q)[kSegment]) {
  const int r = threadIdx.x / 4, c = (threadIdx.x % 4) * kSegment;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    *reinterpret_cast<uint32_t*>(&tile[r][c + 4 * i]) =
        q[4 * i] | (q[4 * i + 1] << 8) | (q[4 * i + 2] << 16) | (uint32_t(q[4 * i + 3]) << 24);
  }
}

// After a barrier: the tile's transpose into out_t [cols, rows].
__device__ void store_transposed(const Tile& tile, uint8_t* out_t, int64_t rows, int64_t cols) {
  const int r = threadIdx.x / 4, c = (threadIdx.x % 4) * kSegment;
  const int64_t t_row = static_cast<int64_t>(blockIdx.x) * kTile + r;
  const int64_t t_col = static_cast<int64_t>(blockIdx.y) * kTile + c;
  if (t_row >= cols || t_col >= rows) return;
  uint8_t q[kSegment];
#pragma unroll
  for (int j = 0; j < kSegment; ++j) q[j] = tile[c + j][r];
  *reinterpret_cast<uint4*>(out_t + t_row * rows + t_col) = pack16(q);
}

// The tile's column sums (of the values before scaling) into column_partials[blockIdx.y][cols],
// once every thread has put its values in `sums`: a fixed order, so the result is deterministic.
__device__ void store_column_sums(const float (&sums)[kTile][kTile + 1], float* column_partials,
                                  int64_t cols) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.x;
  if (threadIdx.x >= kTile || col >= cols) return;
  float total = 0.0f;
  for (int r = 0; r < kTile; ++r) total += sums[r][threadIdx.x];
  column_partials[static_cast<int64_t>(blockIdx.y) * cols + col] = total;
}

template <class In, Fp8Dtype D, Fp8Prologue P>
__global__ void __launch_bounds__(kThreads)
    cast_transpose_kernel(const In* x, const In* pre, int64_t rows, int64_t cols,
                          const float* scale_ptr, uint8_t* out, uint8_t* out_t, float* inverse,
                          float* column_partials, Fp8ScaleUpdate update, bool has_update) {
  // Aligned for the 32-bit stores that pack four fp8 values.
  alignas(16) __shared__ Tile tile;
  __shared__ float sums[kTile][kTile + 1];  // the padding spreads the writes over the banks
  const float scale = *scale_ptr;
  const Segment s = segment_of(rows, cols);
  const int r = threadIdx.x / 4, c = (threadIdx.x % 4) * kSegment;
  float m = 0.0f;
  if (s.inside) {
    float v[kSegment];
    load_values<P>(x, pre, s.row * cols + s.col, v);
    uint8_t q[kSegment];
#pragma unroll
    for (int j = 0; j < kSegment; ++j) {
      m = nan_max(m, fabsf(v[j]));
      q[j] = to_fp8<D>(v[j] * scale);
      if (column_partials) sums[r][c + j] = v[j];
    }
    if (out) *reinterpret_cast<uint4*>(out + s.row * cols + s.col) = pack16(q);
    if (out_t) put_in_tile(tile, q);
  } else if (column_partials) {
#pragma unroll
    for (int j = 0; j < kSegment; ++j) sums[r][c + j] = 0.0f;
  }
  if (out_t || column_partials) __syncthreads();
  if (out_t) store_transposed(tile, out_t, rows, cols);
  if (column_partials) store_column_sums(sums, column_partials, cols);
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) *inverse = 1.0f / scale;
  if (!has_update) return;

  float amax = 0.0f;
  if (!finish_amax(m, update.scratch, amax)) return;
  if (threadIdx.x == 0) {
    int32_t slot = *update.newest + 1;
    if (slot >= update.history_len) slot = 0;
    *update.newest = slot;
    update.history[slot] = amax;
  }
  __syncthreads();
  float reference = amax;
  if (update.use_history_max) {
    float h = 0.0f;
    for (int64_t i = threadIdx.x; i < update.history_len; i += kThreads) {
      h = nan_max(h, update.history[i]);
    }
    reference = block_max(h);
  }
  if (threadIdx.x == 0) {
    *update.last_scale = scale;
    const float next = update.max_over_headroom / reference;
    if (usable(next)) *update.scale = next;
  }
}

template <class In, Fp8Prologue P>
__global__ void __launch_bounds__(kThreads)
    scale_from_amax_kernel(const In* x, const In* pre, int64_t n, float max_over_headroom,
                           float* scale, float* amax_out, uint32_t* scratch) {
  float m = 0.0f;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads * kSegment;
  for (int64_t i = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) * kSegment; i < n;
       i += stride) {
    float v[kSegment];
    load_values<P>(x, pre, i, v);
#pragma unroll
    for (int j = 0; j < kSegment; ++j) m = nan_max(m, fabsf(v[j]));
  }
  float amax = 0.0f;
  if (!finish_amax(m, scratch, amax) || threadIdx.x != 0) return;
  const float next = max_over_headroom / amax;
  if (usable(next)) *scale = next;
  if (amax_out) *amax_out = amax;
}

template <class In>
__global__ void __launch_bounds__(kThreads)
    rowwise_amax_kernel(const In* x, int64_t rows, int64_t cols, uint32_t* row_amax,
                        uint32_t* col_amax) {
  __shared__ uint32_t col_max[kTile];
  if (threadIdx.x < kTile) col_max[threadIdx.x] = 0;
  __syncthreads();
  const Segment s = segment_of(rows, cols);
  float m = 0.0f;
  if (s.inside) {
    float v[kSegment];
    load16(x + s.row * cols + s.col, v);
#pragma unroll
    for (int j = 0; j < kSegment; ++j) {
      const float a = fabsf(v[j]);
      m = nan_max(m, a);
      atomicMax(&col_max[(threadIdx.x % 4) * kSegment + j], __float_as_uint(a));
    }
  }
  // The 4 threads of a row are neighbouring lanes of one warp.
  m = nan_max(m, __shfl_xor_sync(0xffffffff, m, 1));
  m = nan_max(m, __shfl_xor_sync(0xffffffff, m, 2));
  if (s.inside && threadIdx.x % 4 == 0) atomicMax(&row_amax[s.row], __float_as_uint(m));
  __syncthreads();
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.x;
  if (threadIdx.x < kTile && col < cols) atomicMax(&col_amax[col], col_max[threadIdx.x]);
}

template <class In, Fp8Dtype D>
__global__ void __launch_bounds__(kThreads)
    rowwise_cast_transpose_kernel(const In* x, int64_t rows, int64_t cols,
                                  const uint32_t* row_amax, const uint32_t* col_amax,
                                  float max_over_headroom, uint8_t* out, uint8_t* out_t,
                                  float* row_inverse, float* col_inverse) {
  alignas(16) __shared__ Tile tile;  // as above
  const Segment s = segment_of(rows, cols);
  if (s.inside) {
    float v[kSegment];
    load16(x + s.row * cols + s.col, v);
    const float row_scale = power_of_two_scale(max_over_headroom, row_amax[s.row]);
    uint8_t q[kSegment], q_t[kSegment];
#pragma unroll
    for (int j = 0; j < kSegment; ++j) {
      const float col_scale = power_of_two_scale(max_over_headroom, col_amax[s.col + j]);
      q[j] = to_fp8<D>(v[j] * row_scale);
      q_t[j] = to_fp8<D>(v[j] * col_scale);
      if (blockIdx.y == 0 && threadIdx.x / 4 == 0) col_inverse[s.col + j] = 1.0f / col_scale;
    }
    *reinterpret_cast<uint4*>(out + s.row * cols + s.col) = pack16(q);
    put_in_tile(tile, q_t);
    if (blockIdx.x == 0 && threadIdx.x % 4 == 0) row_inverse[s.row] = 1.0f / row_scale;
  }
  __syncthreads();
  store_transposed(tile, out_t, rows, cols);
}

dim3 tiles(int64_t rows, int64_t cols) {
  return dim3(static_cast<unsigned>((cols + kTile - 1) / kTile),
              static_cast<unsigned>((rows + kTile - 1) / kTile));
}

// Calls f(typed pointer) for x's dtype.
template <class F>
void with_input(const void* x, Dtype dtype, F f) {
  switch (dtype) {
    case Dtype::float32: f(static_cast<const float*>(x)); break;
    case Dtype::bfloat16: f(static_cast<const __nv_bfloat16*>(x)); break;
    case Dtype::float16: f(static_cast<const __half*>(x)); break;
  }
}

template <Fp8Prologue P>
using Prologue = std::integral_constant<Fp8Prologue, P>;

// Calls f(typed x, typed pre, Prologue<x.prologue>) for x's dtype.
template <class F>
void with_input(const Fp8Input& x, F f) {
  with_input(x.data, x.dtype, [&](const auto* in) {
    const auto* pre = static_cast<decltype(in)>(x.pre);
    switch (x.prologue) {
      case Fp8Prologue::none: f(in, pre, Prologue<Fp8Prologue::none>{}); break;
      case Fp8Prologue::gelu_tanh: f(in, pre, Prologue<Fp8Prologue::gelu_tanh>{}); break;
      case Fp8Prologue::gelu_tanh_grad: f(in, pre, Prologue<Fp8Prologue::gelu_tanh_grad>{}); break;
    }
  });
}

}  // namespace

// Compute capability 8.9 (Ada) brought fp8: the conversions here and the GEMMs that read them.
KernelImage fp8_quantize_image() { return image_of(rowwise_amax_kernel<float>, 89); }

int64_t fp8_column_partial_rows(int64_t rows) { return (rows + kTile - 1) / kTile; }

void fp8_cast_transpose(const Fp8Input& x, int64_t rows, int64_t cols, const float* scale,
                        Fp8Dtype out_dtype, void* out, void* out_t, float* inverse,
                        float* column_partials, const Fp8ScaleUpdate* update, void* stream) {
  if (rows == 0 || cols == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  const Fp8ScaleUpdate u = update ? *update : Fp8ScaleUpdate{};
  auto* q = static_cast<uint8_t*>(out);
  auto* q_t = static_cast<uint8_t*>(out_t);
  with_input(x, [&](const auto* in, const auto* pre, auto prologue) {
    using In = std::remove_const_t<std::remove_pointer_t<decltype(in)>>;
    constexpr Fp8Prologue P = decltype(prologue)::value;
    if (out_dtype == Fp8Dtype::e4m3) {
      cast_transpose_kernel<In, Fp8Dtype::e4m3, P>
          <<<tiles(rows, cols), kThreads, 0, s>>>(in, pre, rows, cols, scale, q, q_t, inverse,
                                                  column_partials, u, update != nullptr);
    } else {
      cast_transpose_kernel<In, Fp8Dtype::e5m2, P>
          <<<tiles(rows, cols), kThreads, 0, s>>>(in, pre, rows, cols, scale, q, q_t, inverse,
                                                  column_partials, u, update != nullptr);
    }
  });
  check_launch("fp8_cast_transpose kernel launch");
}

void fp8_scale_from_amax(const Fp8Input& x, int64_t n, float max_over_headroom, float* scale,
                         float* amax_out, uint32_t* scratch, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  // A few blocks per multiprocessor stream the whole tensor; more would only add atomics.
  const int64_t wanted = (n + kThreads * kSegment - 1) / (kThreads * kSegment);
  const unsigned blocks = static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(wanted, 1024)));
  with_input(x, [&](const auto* in, const auto* pre, auto prologue) {
    using In = std::remove_const_t<std::remove_pointer_t<decltype(in)>>;
    scale_from_amax_kernel<In, decltype(prologue)::value>
        <<<blocks, kThreads, 0, s>>>(in, pre, n, max_over_headroom, scale, amax_out, scratch);
  });
  check_launch("fp8_scale_from_amax kernel launch");
}

void fp8_rowwise_amax(const void* x, Dtype dtype, int64_t rows, int64_t cols, uint32_t* row_amax,
                      uint32_t* col_amax, void* stream) {
  if (rows == 0 || cols == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  with_input(x, dtype, [&](const auto* in) {
    rowwise_amax_kernel<<<tiles(rows, cols), kThreads, 0, s>>>(in, rows, cols, row_amax, col_amax);
  });
  check_launch("fp8_rowwise_amax kernel launch");
}

void fp8_rowwise_cast_transpose(const void* x, Dtype dtype, int64_t rows, int64_t cols,
                                const uint32_t* row_amax, const uint32_t* col_amax,
                                float max_over_headroom, Fp8Dtype out_dtype, void* out,
                                void* out_t, float* row_inverse, float* col_inverse, void* stream) {
  if (rows == 0 || cols == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  auto* q = static_cast<uint8_t*>(out);
  auto* q_t = static_cast<uint8_t*>(out_t);
  with_input(x, dtype, [&](const auto* in) {
    using In = std::remove_const_t<std::remove_pointer_t<decltype(in)>>;
    if (out_dtype == Fp8Dtype::e4m3) {
      rowwise_cast_transpose_kernel<In, Fp8Dtype::e4m3><<<tiles(rows, cols), kThreads, 0, s>>>(
          in, rows, cols, row_amax, col_amax, max_over_headroom, q, q_t, row_inverse, col_inverse);
    } else {
      rowwise_cast_transpose_kernel<In, Fp8Dtype::e5m2><<<tiles(rows, cols), kThreads, 0, s>>>(
          in, rows, cols, row_amax, col_amax, max_over_headroom, q, q_t, row_inverse, col_inverse);
    }
  });
  check_launch("fp8_rowwise_cast_transpose kernel launch");
}

}  // namespace ampt::kernels::cuda
