// A quantized frozen weight back to the dense operand of its GEMM, in one pass over its bytes:
// each output value one fp32 multiply of its code's value by its scale, rounded once to the
// output type, the same operations as the ATen path (../dequantize.cpp), so the two agree bit for
// bit (__fmul_rn and __fadd_rn: no multiply-add is contracted, as ATen's separate operations do
// not). Memory-bound: a byte of nf4 in, two values out.
#include "ampt/kernels/cuda/element.cuh"
#include "ampt/kernels/cuda/launch.h"

#include <cuda_fp8.h>

#include <algorithm>

namespace ampt::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;

int blocks_for(int64_t work) {
  return static_cast<int>(std::clamp<int64_t>((work + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

// One byte of codes (two values) per thread and step of a grid-stride loop. The tables are read
// from the arguments once per block (__grid_constant__: in place, not copied per thread) into
// shared memory, where the threads' scattered lookups do not serialize as in constant memory.
template <class T>
__global__ void __launch_bounds__(kThreads)
    dequantize_nf4_kernel(const __grid_constant__ Nf4Input w, T* out) {
  __shared__ float values[16];
  __shared__ float dynamic_map[256];
  for (int i = threadIdx.x; i < 256; i += blockDim.x) {
    dynamic_map[i] = w.dynamic_map[i];
    if (i < 16) values[i] = w.values[i];
  }
  __syncthreads();
  const int64_t bytes = (w.numel + 1) / 2;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < bytes;
       i += stride) {
    const int64_t block = i / (kNf4Block / 2);
    const float absmax = __fadd_rn(
        __fmul_rn(dynamic_map[w.absmax[block]], w.absmax2[block / kNf4AbsmaxBlock]), w.offset);
    const unsigned pair = w.codes[i];
    out[2 * i] = from_float<T>(__fmul_rn(values[pair >> 4], absmax));
    if (2 * i + 1 < w.numel) out[2 * i + 1] = from_float<T>(__fmul_rn(values[pair & 15u], absmax));
  }
}

template <RowCode C>
__device__ float row_code_value(uint8_t v) {
  if constexpr (C == RowCode::int8) {
    return static_cast<float>(static_cast<int8_t>(v));
  } else {
    return __half2float(__half(__nv_cvt_fp8_to_halfraw(v, __NV_E4M3)));
  }
}

// Rows along y and columns along x, each a grid-stride loop: no division per value.
template <RowCode C, class T>
__global__ void __launch_bounds__(kThreads)
    dequantize_rows_kernel(const uint8_t* values, const float* scales, int64_t rows, int64_t cols,
                           T* out) {
  for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    const float scale = scales[row];
    const uint8_t* in = values + row * cols;
    T* to = out + row * cols;
    for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < cols;
         j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      to[j] = from_float<T>(__fmul_rn(row_code_value<C>(in[j]), scale));
    }
  }
}

template <RowCode C>
void launch_rows(const void* values, const float* scales, int64_t rows, int64_t cols, Dtype dtype,
                 void* out, cudaStream_t stream) {
  const auto column_blocks = std::clamp<int64_t>((cols + kThreads - 1) / kThreads, 1, 64);
  const dim3 grid(static_cast<unsigned>(column_blocks),
                  static_cast<unsigned>(std::clamp<int64_t>(rows, 1, 65535)));
  const auto* in = static_cast<const uint8_t*>(values);
  switch (dtype) {
    case Dtype::bfloat16:
      dequantize_rows_kernel<C><<<grid, kThreads, 0, stream>>>(
          in, scales, rows, cols, static_cast<__nv_bfloat16*>(out));
      break;
    case Dtype::float16:
      dequantize_rows_kernel<C><<<grid, kThreads, 0, stream>>>(in, scales, rows, cols,
                                                               static_cast<__half*>(out));
      break;
    case Dtype::float32:
      dequantize_rows_kernel<C><<<grid, kThreads, 0, stream>>>(in, scales, rows, cols,
                                                               static_cast<float*>(out));
      break;
  }
}

}  // namespace

KernelImage dequantize_image() { return image_of(dequantize_nf4_kernel<__nv_bfloat16>, 0); }

void dequantize_nf4(const Nf4Input& weight, Dtype dtype, void* out, void* stream) {
  if (weight.numel == 0) return;
  const int blocks = blocks_for((weight.numel + 1) / 2);
  const auto s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case Dtype::bfloat16:
      dequantize_nf4_kernel<<<blocks, kThreads, 0, s>>>(weight, static_cast<__nv_bfloat16*>(out));
      break;
    case Dtype::float16:
      dequantize_nf4_kernel<<<blocks, kThreads, 0, s>>>(weight, static_cast<__half*>(out));
      break;
    case Dtype::float32:
      dequantize_nf4_kernel<<<blocks, kThreads, 0, s>>>(weight, static_cast<float*>(out));
      break;
  }
  check_launch("nf4 dequantize kernel launch");
}

void dequantize_rows(const void* values, RowCode code, const float* scales, int64_t rows,
                     int64_t cols, Dtype dtype, void* out, void* stream) {
  if (rows == 0 || cols == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  if (code == RowCode::int8) {
    launch_rows<RowCode::int8>(values, scales, rows, cols, dtype, out, s);
  } else {
    launch_rows<RowCode::e4m3>(values, scales, rows, cols, dtype, out, s);
  }
  check_launch("row-scaled dequantize kernel launch");
}

}  // namespace ampt::kernels::cuda
