// Averages gradients across ranks the way DDP does: parameters in buckets, each bucket's
// all-reduce started from an autograd hook as soon as backward has produced its last gradient,
// so communication overlaps the rest of backward; finish() waits and writes the averages back.
// Under ZeRO-2 each bucket is reduce-scattered instead and a rank keeps only its slice.
#pragma once

#include "ampt/config/config.h"
#include "ampt/core/flat_layout.h"

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

namespace c10d {
class Work;
}

namespace ampt::distributed {

class Group;

inline constexpr int64_t kBucketBytes = 25 * 1024 * 1024;  // DDP's default bucket_cap_mb

// The buckets: parameters that require grad, in reverse registration order (roughly the order
// backward produces them), one open bucket per (reduce dtype, parameter dtype, device), closed
// when it reaches `bucket_bytes`. FlatUnit::params index `parameters`. ZeRO's flat layout uses
// the same units, so that a bucket's reduce-scatter leaves each rank its slice of the unit.
std::vector<FlatUnit> plan_buckets(const std::vector<at::Tensor>& parameters,
                                   config::ReduceDtype dtype, int64_t bucket_bytes = kBucketBytes);

class GradSync {
 public:
  // All-reduce: registers a post-accumulate-grad hook on every parameter that requires grad,
  // bucketed by plan_buckets.
  GradSync(Group& group, const std::vector<at::Tensor>& parameters, config::ReduceDtype dtype,
           int64_t bucket_bytes = kBucketBytes);
  // Reduce-scatter (ZeRO-2): the buckets are `layout`'s units, and finish() leaves this rank's
  // slice of unit b's average in `shards[b]` (layout.unit_shard_numel(b) elements, any dtype)
  // instead of in the gradients. Each parameter's gradient is released once its bucket has
  // copied it, so full gradients live only until their bucket starts. A bucket's buffer exists
  // only while it communicates, and at most two communicate at once: backward waits for the
  // older one before it starts a third.
  GradSync(Group& group, const std::vector<at::Tensor>& parameters, config::ReduceDtype dtype,
           const FlatLayout& layout, std::vector<at::Tensor> shards);
  // ZeRO-3: every backward reduce-scatters (arm(true) before each micro-batch's) and adds its
  // slices into the shards, which the first arm() of a step zeroes; `copied(b)` is called as
  // soon as bucket b has copied its gradients out, when backward reads the unit's weights no more.
  struct Accumulate {
    std::function<void(std::size_t)> copied;
  };
  GradSync(Group& group, const std::vector<at::Tensor>& parameters, config::ReduceDtype dtype,
           const FlatLayout& layout, std::vector<at::Tensor> shards, Accumulate accumulate);
  ~GradSync();  // removes the hooks
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  // Before each backward: true on the last micro-batch of an optimizer step (communicate), false
  // on the others (gradients only accumulate locally). ZeRO-3 communicates on every one: an arm()
  // first finishes the micro-batch before.
  void arm(bool communicate);
  // After the last backward: starts the buckets no hook started (parameters without a gradient
  // count as zeros), waits for all of them and replaces each gradient by the average over ranks
  // (reduce-scatter: fills the shards).
  void finish();

  int64_t bucket_count() const { return static_cast<int64_t>(buckets_.size()); }

 private:
  struct Bucket {
    std::vector<size_t> params;  // indices into params_
    std::vector<int64_t> offsets;
    at::TensorOptions options;  // the reduce dtype, on the parameters' device
    int64_t size = 0;           // elements, padding to a multiple of the world size included
    at::Tensor buffer;          // flat, in the reduce dtype
    at::Tensor shard;           // reduce-scatter: where finish() leaves this rank's slice
    at::Tensor received;        // reduce-scatter: the collective's output (`shard` when it can be)
    size_t pending = 0;
    c10::intrusive_ptr<c10d::Work> work;
  };

  GradSync(Group& group, const std::vector<at::Tensor>& parameters, config::ReduceDtype dtype,
           const std::vector<FlatUnit>& units, std::vector<at::Tensor> shards, int64_t pad_to);
  void ready(size_t param);  // called by the hooks
  void finish_locked();
  void start_ready_buckets_locked();
  void start(Bucket& bucket);
  // Reduce-scatter: waits for `bucket`, leaves its slice in its shard and frees its buffers.
  void land(Bucket& bucket);
  static constexpr size_t kScatterInFlight = 2;  // as DeepSpeed's two reduce buffers

  Group& group_;
  config::ReduceDtype dtype_;
  bool scatter_ = false;
  std::optional<Accumulate> accumulate_;
  bool step_begins_ = true;  // ZeRO-3: the next arm() is a step's first
  std::vector<at::Tensor> params_;
  std::vector<size_t> bucket_of_;
  std::vector<Bucket> buckets_;
  size_t next_bucket_ = 0;  // buckets start in index order on every rank
  size_t landed_ = 0;       // reduce-scatter: buckets before this one are done
  bool armed_ = false;
  std::mutex mutex_;
};

}  // namespace ampt::distributed
