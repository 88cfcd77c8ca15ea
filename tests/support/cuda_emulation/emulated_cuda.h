// The CUDA C++ of src/ampt/kernels/cuda, run on CPU threads, so that CI (which has no GPU) runs
// the kernels' own code and compares it with the ATen references. Force-included (-include) in
// each file translate.py has rewritten: the toolkit's host-side headers give the types and the
// bfloat16/float16/fp8 conversions, and this file the rest of what the kernels use.
//
// A launch runs its blocks one after another and the threads of a block at once, one std::thread
// each: __syncthreads is a barrier of the block, a warp shuffle an exchange among the warp's
// threads, a __shared__ variable a static (one per block, blocks being sequential), an atomic a
// std::atomic_ref. Arithmetic is the host's: __expf, __logf and rsqrtf round as expf, logf and
// 1/sqrtf do, not as the GPU's approximations, so tests compare with tolerances where those enter.
//
// Faults a GPU would report, or hang on, are errors here: a launch configuration beyond CUDA's
// limits (cudaGetLastError returns cudaErrorInvalidConfiguration, as CUDA's does), a barrier that
// the threads of a block reach from different lines, a shuffle without the full warp's mask; each
// throws std::runtime_error out of the launch, naming the kernel file's line.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <barrier>
#include <bit>
#include <cmath>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
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

// The threads of one block while it runs.
class Block {
 public:
  explicit Block(unsigned threads)
      : sites_(threads),
        barrier_(static_cast<std::ptrdiff_t>(threads), Check{this}) {
    for (unsigned first = 0; first < threads; first += kWarpSize) {
      const unsigned lanes = std::min(kWarpSize, threads - first);
      warps_.push_back(std::make_unique<Warp>(lanes));
    }
  }

  // __syncthreads at `site`, by thread `t`.
  void sync(unsigned t, Site site) {
    sites_[t] = site;
    barrier_.arrive_and_wait();
  }

  // __shfl_xor_sync: v from the lane `lane_mask` away, in every lane of the warp.
  template <class T>
  T shuffle_xor(unsigned t, unsigned mask, T v, int lane_mask, Site site) {
    static_assert(sizeof(T) <= 8, "shuffles move at most 8 bytes");
    auto& warp = *warps_[t / kWarpSize];
    const unsigned lane = t % kWarpSize, other = lane ^ static_cast<unsigned>(lane_mask);
    if (mask != 0xffffffffu || other >= warp.lanes) {
      throw std::runtime_error(site.name() +
                               ": a shuffle needs the whole warp (mask 0xffffffff) and a lane "
                               "inside it");
    }
    std::memcpy(warp.slots[lane].data(), &v, sizeof(T));
    warp.barrier.arrive_and_wait();
    T out;
    std::memcpy(&out, warp.slots[other].data(), sizeof(T));
    warp.barrier.arrive_and_wait();
    return out;
  }

  // Thread `t` has returned: later barriers do not wait for it (as on Volta and later GPUs).
  void exit(unsigned t) {
    sites_[t] = Site{};
    barrier_.arrive_and_drop();
    warps_[t / kWarpSize]->barrier.arrive_and_drop();
  }

  // The first fault of any thread, rethrown by the launch.
  void record(std::exception_ptr fault) {
    const std::lock_guard lock(mutex_);
    if (!fault_) fault_ = fault;
  }
  std::exception_ptr fault() const { return fault_; }

 private:
  struct Warp {
    explicit Warp(unsigned n) : lanes(n), barrier(static_cast<std::ptrdiff_t>(n)) {}
    unsigned lanes;
    std::array<std::array<unsigned char, 8>, kWarpSize> slots{};
    std::barrier<> barrier;
  };

  // Runs once per barrier phase, when every running thread has arrived: they must all have come
  // from the same __syncthreads.
  struct Check {
    Block* block;
    void operator()() noexcept {
      const Site* first = nullptr;
      for (const Site& s : block->sites_) {
        if (s.file == nullptr) continue;  // exited
        if (first != nullptr && s.line != first->line) {
          block->record(std::make_exception_ptr(std::runtime_error(
              first->name() + ": threads of one block reached different __syncthreads (lines " +
              std::to_string(first->line) + " and " + std::to_string(s.line) +
              "), which hangs or corrupts a GPU")));
          return;
        }
        if (first == nullptr) first = &s;
      }
    }
  };

  std::vector<Site> sites_;
  std::barrier<Check> barrier_;
  std::vector<std::unique_ptr<Warp>> warps_;
  std::mutex mutex_;
  std::exception_ptr fault_;
};

inline thread_local Block* current_block = nullptr;
inline thread_local unsigned current_thread = 0;  // linear index in the block
inline thread_local uint3 thread_index{};
inline uint3 block_index{};
inline dim3 block_dim, grid_dim;

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
  return error == cudaSuccess ? "no error" : "invalid configuration argument";
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

// `kernel` (the kernel called with its arguments) over the launch's grid, synchronously. The
// block's threads are created once and run the blocks in turn: a new Block between two blocks.
inline void launch(const LaunchConfig& c, const std::function<void()>& kernel) {
  if (!valid(c)) {
    pending_error() = cudaErrorInvalidConfiguration;
    return;
  }
  grid_dim = c.grid;
  block_dim = c.block;
  const unsigned threads = c.block.x * c.block.y * c.block.z;
  const unsigned long long blocks = static_cast<unsigned long long>(c.grid.x) * c.grid.y * c.grid.z;
  std::unique_ptr<Block> block;
  unsigned long long next = 0;
  std::exception_ptr fault;
  // Between blocks, once every thread has left the previous one: check it, set up the next.
  const auto between = [&]() noexcept {
    if (block && block->fault()) fault = block->fault();
    if (fault || next == blocks) {
      block.reset();
      return;
    }
    block = std::make_unique<Block>(threads);
    block_index = {static_cast<unsigned>(next % c.grid.x),
                   static_cast<unsigned>(next / c.grid.x % c.grid.y),
                   static_cast<unsigned>(next / (static_cast<unsigned long long>(c.grid.x) * c.grid.y))};
    ++next;
  };
  std::barrier turn(static_cast<std::ptrdiff_t>(threads), between);
  std::vector<std::thread> running;
  running.reserve(threads);
  for (unsigned t = 0; t < threads; ++t) {
    running.emplace_back([&, t] {
      current_thread = t;
      thread_index = {t % c.block.x, t / c.block.x % c.block.y, t / (c.block.x * c.block.y)};
      for (;;) {
        turn.arrive_and_wait();
        if (!block) return;
        current_block = block.get();
        try {
          kernel();
        } catch (...) {
          block->record(std::current_exception());
        }
        block->exit(t);
      }
    });
  }
  for (auto& thread : running) thread.join();
  if (fault) std::rethrow_exception(fault);
}

template <class T>
T atomic_max(T* address, T value) {
  std::atomic_ref<T> a(*address);
  T old = a.load();
  while (old < value && !a.compare_exchange_weak(old, value)) {
  }
  return old;
}

template <class T>
T atomic_add(T* address, T value) {
  return std::atomic_ref<T>(*address).fetch_add(value);
}

template <class T>
T atomic_exch(T* address, T value) {
  return std::atomic_ref<T>(*address).exchange(value);
}

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

#define threadIdx (::emu::thread_index)
#define blockIdx (::emu::block_index)
#define blockDim (::emu::block_dim)
#define gridDim (::emu::grid_dim)

#define __syncthreads() \
  (::emu::current_block->sync(::emu::current_thread, ::emu::Site{__FILE__, __LINE__}))
#define __shfl_xor_sync(mask, v, lane_mask)                                               \
  (::emu::current_block->shuffle_xor(::emu::current_thread, (mask), (v), (lane_mask), \
                                     ::emu::Site{__FILE__, __LINE__}))
#define __threadfence() std::atomic_thread_fence(std::memory_order_seq_cst)
#define atomicMax(address, value) ::emu::atomic_max((address), (value))
#define atomicAdd(address, value) ::emu::atomic_add((address), (value))
#define atomicExch(address, value) ::emu::atomic_exch((address), (value))

#define __float_as_uint(f) std::bit_cast<unsigned>(static_cast<float>(f))
#define __uint_as_float(u) std::bit_cast<float>(static_cast<unsigned>(u))
#define __expf(x) std::exp(static_cast<float>(x))
#define __logf(x) std::log(static_cast<float>(x))
#define rsqrtf(x) (1.0f / std::sqrt(static_cast<float>(x)))

#define cudaGetLastError ::emu::get_last_error
#define cudaGetErrorString ::emu::error_string
