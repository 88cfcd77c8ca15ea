// Averages gradients across ranks the way DDP does: parameters in buckets, each bucket's
// all-reduce started from an autograd hook as soon as backward has produced its last gradient,
// so communication overlaps the rest of backward; finish() waits and writes the averages back.
#pragma once

#include "ampt/config/config.h"

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include <cstdint>
#include <mutex>
#include <vector>

namespace c10d {
class Work;
}

namespace ampt::distributed {

class Group;

class GradSync {
 public:
  static constexpr int64_t kBucketBytes = 25 * 1024 * 1024;  // DDP's default bucket_cap_mb

  // Registers a post-accumulate-grad hook on every parameter that requires grad. Buckets hold
  // parameters in reverse registration order (roughly the order backward produces them).
  GradSync(Group& group, const std::vector<at::Tensor>& parameters, config::AllreduceDtype dtype,
           int64_t bucket_bytes = kBucketBytes);
  ~GradSync();  // removes the hooks
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  // Before each backward: true on the last micro-batch of an optimizer step (communicate), false
  // on the others (gradients only accumulate locally).
  void arm(bool communicate);
  // After the last backward: starts the buckets no hook started (parameters without a gradient
  // count as zeros), waits for all of them and replaces each gradient by the average over ranks.
  void finish();

  int64_t bucket_count() const { return static_cast<int64_t>(buckets_.size()); }

 private:
  struct Bucket {
    std::vector<size_t> params;  // indices into params_
    std::vector<int64_t> offsets;
    at::Tensor buffer;  // flat, in the all-reduce dtype
    size_t pending = 0;
    c10::intrusive_ptr<c10d::Work> work;
  };

  void ready(size_t param);  // called by the hooks
  void start_ready_buckets_locked();
  void start(Bucket& bucket);

  Group& group_;
  std::vector<at::Tensor> params_;
  std::vector<size_t> bucket_of_;
  std::vector<Bucket> buckets_;
  size_t next_bucket_ = 0;  // buckets start in index order on every rank
  bool armed_ = false;
  std::mutex mutex_;
};

}  // namespace ampt::distributed
