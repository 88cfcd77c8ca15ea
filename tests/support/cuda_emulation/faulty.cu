// Kernels with the faults the CPU emulation must report or expose (tests/kernels/cuda/
// emulation_test.cpp), and one without, whose result shows that blocks, barriers and shuffles
// behave as on a GPU. Only the emulation compiles this file.
#include "ampt/kernels/cuda/element.cuh"

namespace ampt::kernels::cuda::faulty {
namespace {

// The threads of one block reach different barriers.
__global__ void divergent_barrier_kernel(int* out) {
  if (threadIdx.x < 16) {
    __syncthreads();
    out[threadIdx.x] = 1;
  } else {
    __syncthreads();
    out[threadIdx.x] = 2;
  }
}

// Half a warp shuffles.
__global__ void partial_shuffle_kernel(float* out) {
  out[threadIdx.x] = __shfl_xor_sync(0x0000ffffu, static_cast<float>(threadIdx.x), 1);
}

// Half a warp shuffles while the other half goes on to a barrier.
__global__ void shuffle_not_reached_kernel(float* out) {
  float v = static_cast<float>(threadIdx.x);
  if (threadIdx.x < 16) v = __shfl_xor_sync(0xffffffff, v, 1);
  __syncthreads();
  out[threadIdx.x] = v;
}

// out ← x reversed through shared memory, with or without the barrier between the writes and
// the reads.
__global__ void reverse_kernel(const float* x, float* out, bool with_barrier) {
  __shared__ float staged[64];
  staged[threadIdx.x] = x[threadIdx.x];
  if (with_barrier) __syncthreads();
  out[threadIdx.x] = staged[63 - threadIdx.x];
}

// sums[b] = Σ x over block b's 256 elements, through warp shuffles and shared memory; every
// thread reads its block's total back into seen[its global index].
__global__ void block_sums_kernel(const float* x, float* sums, float* seen) {
  __shared__ float warp_sums[8];
  __shared__ float total;
  const unsigned i = blockIdx.x * 256 + threadIdx.x;
  float v = x[i];
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffff, v, offset);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0.0f;
    for (int w = 0; w < 8; ++w) t += warp_sums[w];
    total = t;
    sums[blockIdx.x] = t;
  }
  __syncthreads();
  seen[i] = total;
}

}  // namespace

void divergent_barrier(int* out) {
  divergent_barrier_kernel<<<1, 64>>>(out);
  check_launch("divergent_barrier kernel launch");
}

void partial_shuffle(float* out) {
  partial_shuffle_kernel<<<1, 32>>>(out);
  check_launch("partial_shuffle kernel launch");
}

void shuffle_not_reached(float* out) {
  shuffle_not_reached_kernel<<<1, 32>>>(out);
  check_launch("shuffle_not_reached kernel launch");
}

void reverse(const float* x, float* out, bool with_barrier) {
  reverse_kernel<<<1, 64>>>(x, out, with_barrier);
  check_launch("reverse kernel launch");
}

// `threads` other than 256 only to launch a block CUDA refuses.
void block_sums(const float* x, unsigned blocks, unsigned threads, float* sums, float* seen) {
  block_sums_kernel<<<blocks, threads>>>(x, sums, seen);
  check_launch("block_sums kernel launch");
}

}  // namespace ampt::kernels::cuda::faulty
