// A copy of a run's state in host memory, taken between optimizer steps, for a checkpoint that
// is written while training goes on.
#pragma once

#include "ampt/core/named_tensors.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace ampt::checkpoint {

// targets[i] = sources[i], the state copies of saves and loads. Between contiguous CPU tensors
// of one dtype and shape, copy_bytes (threads of its own and streaming stores): on a busy CPU the
// OpenMP team of Tensor::copy_ waits on its threads' time slices (3 to 5 times slower on the
// 2-core benchmark machine). Otherwise Tensor::copy_, asynchronous when `non_blocking` (a CUDA
// source, pinned target).
void copy_tensors(const std::vector<torch::Tensor>& targets,
                  const std::vector<torch::Tensor>& sources, bool non_blocking = false);

// One buffer, allocated by the first capture and reused by every later one while the state's
// size stays the same, so a run holds one extra copy of its state, not one per save. Pinned
// (page-locked) when the state is on a CUDA device, so the device-to-host copy runs at the
// link's speed. The training thread pauses only for the copy; the background write then reads
// the buffer while the next steps update the live tensors in place.
class HostSnapshot {
 public:
  // Copies `tensors` into the buffer and waits for the copies. Returns CPU tensors with the
  // same names, shapes and dtypes, each viewing its copy through a storage of its own (as
  // TensorArchiveWriter wants) that keeps the buffer alive. The previous capture's tensors
  // are overwritten: call it only once their write has finished.
  NamedTensors capture(const NamedTensors& tensors);
  // Allocates the buffer for tensors like these ahead of the first capture, so that the first
  // save's pause is no longer than the others' (pinning a few GB takes a while).
  void reserve(const NamedTensors& tensors);

  // Bytes the buffer holds (0 before the first capture).
  int64_t bytes() const { return capacity_; }

 private:
  void fit(const NamedTensors& tensors);

  std::shared_ptr<uint8_t> buffer_;
  int64_t capacity_ = 0;
  bool pinned_ = false;
};

}  // namespace ampt::checkpoint
