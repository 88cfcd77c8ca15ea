// The CUDA C++ of src/ampt/kernels/cuda, run on the CPU, so that CI (which has no GPU) runs the
// kernels' own code and compares it with the ATen references. Force-included (-include) in each
// file translate.py has rewritten: the toolkit's host-side headers give the types and the
// bfloat16/float16/fp8 conversions, and this file the rest of what the kernels use.
//
// A launch runs its blocks one after another, and a block's threads as fibers on the launching
// thread (Block, below): __syncthreads and warp shuffles are where a thread waits for the
// others, a __shared__ variable is a static (one per block, blocks being sequential), an atomic
// a plain read-modify-write. No thread of the operating system is started, so a test runs the
// same way every time. Arithmetic is the host's: __expf, __logf and rsqrtf round as expf, logf
// and 1/sqrtf do, not as the GPU's approximations, and tanhf as glibc's, so tests compare with
// tolerances where those enter.
//
// The emulated device has a compute capability (emulated_device.h: 9.0 unless a test fakes
// another) and each file the images of its build (AMPT_CUDA_SASS and AMPT_CUDA_PTX, defined per
// file by tests/CMakeLists.txt from the build's own lists): cudaFuncGetAttributes reports the
// image CUDA's loader would pick, and a launch with none fails as on a GPU, with
// cudaErrorNoKernelImageForDevice.
//
// Faults a GPU would report, or hang on, are errors here: a launch configuration beyond CUDA's
// limits (cudaGetLastError returns cudaErrorInvalidConfiguration, as CUDA's does), a barrier that
// the threads of a block reach from different lines, a shuffle without the full warp's mask or
// that some of the warp's threads never reach; each throws std::runtime_error out of the launch,
// naming the kernel file's line.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "emulated_device.h"

#include <ucontext.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace emu {

inline constexpr unsigned kWarpSize = 32;

// Where in a kernel file a thread is: "faulty.cu:12".
struct Site {
  const char* file = nullptr;  // null: the thread has exited
  int line = 0;
  std::string name() const {
    const std::string path(file);
    return path.substr(path.find_last_of('/') + 1) + ":" + std::to_string(line);
  }
};

// Memory for the stacks of a block's threads, allocated once per launch and used by its blocks
// in turn; pages never touched cost nothing.
class Stacks {
 public:
  static constexpr std::size_t kBytes = 128 * 1024;
  explicit Stacks(unsigned threads) : memory_(new char[threads * kBytes]) {}
  char* of(unsigned thread) { return memory_.get() + thread * kBytes; }

 private:
  std::unique_ptr<char[]> memory_;
};

// One block's threads, as fibers (ucontext) on the launching thread: each runs until it waits,
// at a __syncthreads or in a shuffle, or returns; then the next. When none can go on, the warps
// whose threads all wait in a shuffle go on, else the block, if all its threads wait at one
// barrier. A thread thus runs as far ahead of the others as a GPU could let it: a missing
// barrier shows as a read of what another thread has not yet written, every time.
class Block {
 public:
  Block(unsigned threads, dim3 shape, Stacks& stacks)
      : shape_(shape), fibers_(threads), stacks_(stacks) {}

  // The kernel in every thread, to the end; rethrows the first fault.
  void run(const std::function<void()>& kernel);

  // The block running on this thread, if any.
  static Block*& running() {
    static thread_local Block* block = nullptr;
    return block;
  }

  // __syncthreads at `site`.
  void sync(Site site) { wait(State::at_barrier, site); }

  // __shfl_xor_sync: v from the lane `lane_mask` away, in every lane of the warp.
  template <class T>
  T shuffle_xor(unsigned mask, T v, int lane_mask, Site site) {
    static_assert(sizeof(T) <= sizeof(Slot), "shuffles move at most 8 bytes");
    const unsigned lane = current_ % kWarpSize, first = current_ - lane;
    const unsigned other = first + (lane ^ static_cast<unsigned>(lane_mask));
    if (mask != 0xffffffffu || other >= fibers_.size() || other / kWarpSize != current_ / kWarpSize) {
      throw std::runtime_error(site.name() +
                               ": a shuffle needs the whole warp (mask 0xffffffff) and a lane "
                               "inside it");
    }
    std::memcpy(fibers_[current_].slot.data(), &v, sizeof(T));
    wait(State::in_shuffle, site);
    if (fibers_[other].state == State::done) {
      throw std::runtime_error(site.name() + ": a shuffle with a lane that has returned");
    }
    T out;
    std::memcpy(&out, fibers_[other].slot.data(), sizeof(T));
    wait(State::in_shuffle, site);  // every lane has read before any writes again
    return out;
  }

 private:
  enum class State { ready, at_barrier, in_shuffle, done };
  using Slot = std::array<unsigned char, 8>;
  struct Fiber {
    ucontext_t context;
    State state = State::ready;
    Site site;
    Slot slot{};
  };

  static void entry();
  void wait(State state, Site site) {
    auto& fiber = fibers_[current_];
    fiber.state = state;
    fiber.site = site;
    swapcontext(&fiber.context, &scheduler_);
  }
  void record(std::exception_ptr fault) {
    if (!fault_) fault_ = fault;
  }
  bool release();

  dim3 shape_;
  std::vector<Fiber> fibers_;
  Stacks& stacks_;
  ucontext_t scheduler_;
  const std::function<void()>* kernel_ = nullptr;
  unsigned current_ = 0;
  std::exception_ptr fault_;
};

inline uint3 thread_index{};
inline uint3 block_index{};
inline dim3 block_dim, grid_dim;

inline void Block::entry() {
  Block& block = *running();
  try {
    (*block.kernel_)();
  } catch (...) {
    block.record(std::current_exception());
  }
  block.fibers_[block.current_].state = State::done;
}  // back to the scheduler: uc_link

inline void Block::run(const std::function<void()>& kernel) {
  kernel_ = &kernel;
  running() = this;
  for (unsigned t = 0; t < fibers_.size(); ++t) {
    auto& context = fibers_[t].context;
    getcontext(&context);
    context.uc_stack.ss_sp = stacks_.of(t);
    context.uc_stack.ss_size = Stacks::kBytes;
    context.uc_link = &scheduler_;
    makecontext(&context, &Block::entry, 0);
  }
  const auto finished = [](const Fiber& f) { return f.state == State::done; };
  do {
    for (unsigned t = 0; t < fibers_.size(); ++t) {
      if (fibers_[t].state != State::ready) continue;
      current_ = t;
      thread_index = {t % shape_.x, t / shape_.x % shape_.y, t / (shape_.x * shape_.y)};
      swapcontext(&scheduler_, &fibers_[t].context);
    }
  } while (!fault_ && !std::ranges::all_of(fibers_, finished) && release());
  // A fault leaves the other threads where they wait: their stacks hold nothing to destroy but
  // the kernel's own values.
  running() = nullptr;
  if (fault_) std::rethrow_exception(fault_);
}

// Called when no thread can go on: lets the waiting ones go on, or records why none can.
inline bool Block::release() {
  bool released = false;
  for (std::size_t first = 0; first < fibers_.size(); first += kWarpSize) {
    const auto warp =
        std::span(fibers_).subspan(first, std::min<std::size_t>(kWarpSize, fibers_.size() - first));
    const auto in_shuffle = [](const Fiber& f) { return f.state == State::in_shuffle; };
    if (!std::ranges::any_of(warp, in_shuffle) ||
        !std::ranges::all_of(warp, [&](const Fiber& f) { return in_shuffle(f) || f.state == State::done; })) {
      continue;
    }
    for (auto& f : warp) {
      if (in_shuffle(f)) f.state = State::ready;
    }
    released = true;
  }
  if (released) return true;
  const Fiber* first = nullptr;
  for (const auto& f : fibers_) {
    if (f.state == State::done) continue;
    if (f.state != State::at_barrier) {
      record(std::make_exception_ptr(std::runtime_error(
          f.site.name() + ": a shuffle that some threads of the warp never reach, which hangs "
                          "a GPU")));
      return false;
    }
    if (first != nullptr && f.site.line != first->site.line) {
      record(std::make_exception_ptr(std::runtime_error(
          first->site.name() + ": threads of one block reached different __syncthreads (lines " +
          std::to_string(first->site.line) + " and " + std::to_string(f.site.line) +
          "), which hangs or corrupts a GPU")));
      return false;
    }
    if (first == nullptr) first = &f;
  }
  for (auto& f : fibers_) {
    if (f.state == State::at_barrier) f.state = State::ready;
  }
  return true;
}

inline Block* current_block() { return Block::running(); }

inline cudaError_t& pending_error() {
  static thread_local cudaError_t error = cudaSuccess;
  return error;
}

inline cudaError_t get_last_error() {
  const cudaError_t error = pending_error();
  pending_error() = cudaSuccess;
  return error;
}

inline const char* error_string(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorNoKernelImageForDevice:
      return "no kernel image is available for execution on the device";
    default: return "invalid configuration argument";
  }
}

inline cudaError_t get_device(int* device) {
  *device = 0;
  return cudaSuccess;
}

inline cudaError_t device_attribute(int* value, cudaDeviceAttr attribute, int) {
  switch (attribute) {
    case cudaDevAttrComputeCapabilityMajor: *value = device_capability() / 10; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = device_capability() % 10; return cudaSuccess;
    default: return cudaErrorInvalidValue;
  }
}

// What cudaFuncGetAttributes reports of the image the emulated device runs.
inline cudaError_t func_attributes(cudaFuncAttributes* attributes, const Images& images) {
  const auto [binary, ptx] = chosen_image(images, device_capability());
  if (binary == 0) return cudaErrorNoKernelImageForDevice;
  *attributes = cudaFuncAttributes{};
  attributes->binaryVersion = binary;
  attributes->ptxVersion = ptx;
  return cudaSuccess;
}

// The `<<<grid, block, shared bytes, stream>>>` of a launch.
struct LaunchConfig {
  LaunchConfig(dim3 grid_, dim3 block_, size_t shared_ = 0, cudaStream_t = nullptr)
      : grid(grid_), block(block_), shared(shared_) {}
  dim3 grid, block;
  size_t shared;
};

// CUDA's limits on compute capability 9.0.
inline bool valid(const LaunchConfig& c) {
  const unsigned long long threads =
      static_cast<unsigned long long>(c.block.x) * c.block.y * c.block.z;
  return c.grid.x >= 1 && c.grid.y >= 1 && c.grid.z >= 1 && c.grid.x <= 2147483647u &&
         c.grid.y <= 65535 && c.grid.z <= 65535 && threads >= 1 && threads <= 1024 &&
         c.block.x <= 1024 && c.block.y <= 1024 && c.block.z <= 64 && c.shared == 0;
}

// `kernel` (the kernel called with its arguments) over the launch's grid, synchronously, one
// block after another, when the device runs one of the file's `images`.
inline void launch(const LaunchConfig& c, const Images& images,
                   const std::function<void()>& kernel) {
  if (chosen_image(images, device_capability()).first == 0) {
    pending_error() = cudaErrorNoKernelImageForDevice;
    return;
  }
  if (!valid(c)) {
    pending_error() = cudaErrorInvalidConfiguration;
    return;
  }
  grid_dim = c.grid;
  block_dim = c.block;
  const unsigned threads = c.block.x * c.block.y * c.block.z;
  Stacks stacks(threads);
  for (unsigned z = 0; z < c.grid.z; ++z) {
    for (unsigned y = 0; y < c.grid.y; ++y) {
      for (unsigned x = 0; x < c.grid.x; ++x) {
        block_index = {x, y, z};
        Block(threads, c.block, stacks).run(kernel);
      }
    }
  }
}

template <class T>
T atomic_max(T* address, T value) {
  const T old = *address;
  if (old < value) *address = value;
  return old;
}

template <class T>
T atomic_add(T* address, T value) {
  return std::exchange(*address, *address + value);
}

template <class T>
T atomic_exch(T* address, T value) {
  return std::exchange(*address, value);
}

// This file's images, from its build's lists.
#if !defined(AMPT_CUDA_SASS) || !defined(AMPT_CUDA_PTX)
#error "AMPT_CUDA_SASS and AMPT_CUDA_PTX name the images a kernel file is built for (tests/CMakeLists.txt)"
#endif
namespace {
const Images& file_images() {
  static const Images images{{AMPT_CUDA_SASS}, AMPT_CUDA_PTX};
  return images;
}
}  // namespace

}  // namespace emu

using std::isfinite;  // CUDA's device maths has it unqualified

// The kernels' vocabulary, after the toolkit's headers have used their own meanings.
#undef __global__
#define __global__
#undef __device__
#define __device__
#undef __shared__
#define __shared__ static
#undef __launch_bounds__
#define __launch_bounds__(...)
#undef __forceinline__
#define __forceinline__ inline
#undef __grid_constant__
#define __grid_constant__

#define threadIdx (::emu::thread_index)
#define blockIdx (::emu::block_index)
#define blockDim (::emu::block_dim)
#define gridDim (::emu::grid_dim)

#define __syncthreads() (::emu::current_block()->sync(::emu::Site{__FILE__, __LINE__}))
#define __shfl_xor_sync(mask, v, lane_mask) \
  (::emu::current_block()->shuffle_xor((mask), (v), (lane_mask), ::emu::Site{__FILE__, __LINE__}))
#define __threadfence() std::atomic_thread_fence(std::memory_order_seq_cst)
#define atomicMax(address, value) ::emu::atomic_max((address), (value))
#define atomicAdd(address, value) ::emu::atomic_add((address), (value))
#define atomicExch(address, value) ::emu::atomic_exch((address), (value))

#define __float_as_uint(f) std::bit_cast<unsigned>(static_cast<float>(f))
#define __uint_as_float(u) std::bit_cast<float>(static_cast<unsigned>(u))
#define __int_as_float(i) std::bit_cast<float>(static_cast<int>(i))
#define __expf(x) std::exp(static_cast<float>(x))
#define __logf(x) std::log(static_cast<float>(x))
#define rsqrtf(x) (1.0f / std::sqrt(static_cast<float>(x)))
// Rounded operations that are never contracted into a multiply-add: the host's, which g++ does
// not contract without -mfma.
#define __fmul_rn(a, b) (static_cast<float>(a) * static_cast<float>(b))
#define __fadd_rn(a, b) (static_cast<float>(a) + static_cast<float>(b))

#define cudaGetLastError ::emu::get_last_error
#define cudaGetErrorString ::emu::error_string
#define cudaGetDevice ::emu::get_device
#define cudaDeviceGetAttribute ::emu::device_attribute
#define cudaFuncGetAttributes(attributes, kernel) \
  ::emu::func_attributes((attributes), ::emu::file_images())
