// Targets outside [0, classes) (the ignore index aside) are an error in the data: cross-entropy
// would read outside a row (ampt's kernel makes such a row's loss NaN instead) or stop the GPU on
// a device-side assert (ATen's). Checked on the host where waiting costs nothing; in a training
// step, which must not wait for the device, on the device instead (a TargetCheckScope): the
// step's loss turns NaN, so the step is skipped, and the first bad target is kept in a small
// device record that the stability monitor carries to the host with the step's own record.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>

namespace ampt::kernels {

constexpr int64_t kIgnoreIndex = -100;  // PyTorch's cross_entropy default

// The device-side record of bad targets: how many so far, the first one's position in its batch
// and its value; and, on the host, that batch's size and the classes it was checked against.
class TargetCheck {
 public:
  // `host_loop`: record in one loop over the targets on the host, where they are CPU tensors
  // (nothing to wait for there, and a loop costs less than the ~25 tensor operations); false
  // records with tensor operations on any device, as on a GPU.
  explicit TargetCheck(const c10::Device& device, bool host_loop = true);

  // Adds `targets`' bad entries to the record, on the device (the first bad batch's position
  // and value are kept).
  void record(const torch::Tensor& targets, int64_t classes);
  // int64 [3]: bad targets so far, the first's position, its value.
  const torch::Tensor& values() const { return record_; }
  // The error for the record's host copy (count > 0).
  std::string error(int64_t count, int64_t position, int64_t value) const;

 private:
  torch::Tensor record_;
  bool host_loop_;
  int64_t numel_ = 0;
  int64_t classes_ = 0;
};

// While alive, check_targets on this thread records into `check` instead of waiting for the
// answer.
class TargetCheckScope {
 public:
  explicit TargetCheckScope(TargetCheck* check);
  ~TargetCheckScope();
  TargetCheckScope(const TargetCheckScope&) = delete;
  TargetCheckScope& operator=(const TargetCheckScope&) = delete;

 private:
  TargetCheck* previous_;
};

// Throws a RuntimeError naming the first target outside [0, classes) that is not kIgnoreIndex,
// its position and the vocabulary size; within a TargetCheckScope, records them there instead
// (no wait). On a GPU the throwing check waits for the targets; not while a CUDA graph is
// captured (its warm-up steps were checked, and the kernels turn a bad target into NaN).
void check_targets(const torch::Tensor& targets, int64_t classes);

// ATen's mean cross-entropy over `logits` [rows, classes] that a bad target cannot make read
// outside a row: checked as check_targets does, such targets left out and the loss made NaN.
torch::Tensor checked_cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets);

}  // namespace ampt::kernels
