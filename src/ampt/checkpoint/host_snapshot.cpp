#include "ampt/checkpoint/host_snapshot.h"

#include "ampt/checkpoint/byte_copy.h"
#include "ampt/core/errors.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <torch/cuda.h>

#include <cstdlib>
#include <cstring>

namespace ampt::checkpoint {
namespace {

// Every tensor starts on a 64-byte boundary, as in the file it is written to.
constexpr int64_t kBufferAlignment = 64;

int64_t aligned(int64_t bytes) { return (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment; }

std::shared_ptr<uint8_t> allocate(int64_t bytes, bool pinned) {
  void* memory = nullptr;
  if (pinned) {
    // cudaHostAlloc directly: torch's pinned-memory cache rounds up to a power of two, which
    // would waste up to half of a buffer this size.
    if (const auto rc = cudaHostAlloc(&memory, static_cast<size_t>(bytes), cudaHostAllocDefault);
        rc != cudaSuccess) {
      throw RuntimeError(fmt::format("cannot allocate {} bytes of pinned host memory for "
                                     "checkpoints: {}",
                                     bytes, cudaGetErrorString(rc)));
    }
    return {static_cast<uint8_t*>(memory), [](uint8_t* p) { cudaFreeHost(p); }};
  }
  memory = std::aligned_alloc(kBufferAlignment, static_cast<size_t>(bytes));
  if (memory == nullptr) {
    throw RuntimeError(
        fmt::format("cannot allocate {} bytes of host memory for checkpoints", bytes));
  }
  // Fault the pages in now rather than during the first snapshot (pinning does it on CUDA).
  std::memset(memory, 0, static_cast<size_t>(bytes));
  return {static_cast<uint8_t*>(memory), [](uint8_t* p) { std::free(p); }};
}

}  // namespace

void copy_tensors(const std::vector<torch::Tensor>& targets,
                  const std::vector<torch::Tensor>& sources, bool non_blocking) {
  std::vector<ByteCopy> byte_copies;
  for (size_t i = 0; i < targets.size(); ++i) {
    const auto& target = targets[i];
    const auto& source = sources[i];
    if (target.is_cpu() && source.is_cpu() && target.is_contiguous() && source.is_contiguous() &&
        target.dtype() == source.dtype() && target.sizes() == source.sizes()) {
      byte_copies.push_back({target.data_ptr(), source.data_ptr(), source.nbytes()});
    } else {
      target.copy_(source, non_blocking);
    }
  }
  copy_bytes(byte_copies);
}

void HostSnapshot::reserve(const NamedTensors& tensors) { fit(tensors); }

void HostSnapshot::fit(const NamedTensors& tensors) {
  int64_t total = 0;
  bool on_cuda = false;
  for (const auto& [name, tensor] : tensors) {
    total += aligned(static_cast<int64_t>(tensor.nbytes()));
    on_cuda = on_cuda || tensor.is_cuda();
  }
  if (total != capacity_ || on_cuda != pinned_) {
    buffer_.reset();  // free the old buffer before taking the new one
    buffer_ = allocate(std::max<int64_t>(total, kBufferAlignment), on_cuda);
    capacity_ = total;
    pinned_ = on_cuda;
  }
}

NamedTensors HostSnapshot::capture(const NamedTensors& tensors) {
  fit(tensors);
  NamedTensors out;
  out.reserve(tensors.size());
  std::vector<torch::Tensor> targets;
  std::vector<torch::Tensor> sources;
  int64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    auto* owner = new std::shared_ptr<uint8_t>(buffer_);
    auto copy = torch::from_blob(
        buffer_.get() + offset, tensor.sizes(),
        [owner](void*) { delete owner; }, torch::TensorOptions().dtype(tensor.dtype()));
    targets.push_back(copy);
    sources.push_back(tensor.detach());
    out.emplace_back(name, std::move(copy));
    offset += aligned(static_cast<int64_t>(tensor.nbytes()));
  }
  // Asynchronous from a CUDA device into pinned memory; waited for below, once.
  copy_tensors(targets, sources, /*non_blocking=*/pinned_);
  if (pinned_) torch::cuda::synchronize();
  return out;
}

}  // namespace ampt::checkpoint
