#include "ampt/distributed/grad_sync.h"

#include "ampt/distributed/process_group.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <functional>
#include <map>
#include <tuple>

namespace ampt::distributed {
namespace {

class ReadyHook : public torch::autograd::PostAccumulateGradHook {
 public:
  explicit ReadyHook(std::function<void()> on_ready) : on_ready_(std::move(on_ready)) {}
  void operator()(const torch::autograd::Variable&) override { on_ready_(); }

 private:
  std::function<void()> on_ready_;
};

c10::ScalarType reduce_dtype(config::ReduceDtype choice, c10::ScalarType grad) {
  switch (choice) {
    case config::ReduceDtype::fp32: return at::kFloat;
    case config::ReduceDtype::bf16: return at::kBFloat16;
    case config::ReduceDtype::grad: break;
  }
  return grad;
}

}  // namespace

std::vector<FlatUnit> plan_buckets(const std::vector<at::Tensor>& parameters,
                                   config::ReduceDtype dtype, int64_t bucket_bytes) {
  std::vector<FlatUnit> units;
  std::vector<int64_t> bytes;
  std::map<std::tuple<c10::ScalarType, c10::ScalarType, std::string>, size_t> open;
  for (size_t i = parameters.size(); i-- > 0;) {
    const auto& p = parameters[i];
    if (!p.requires_grad()) continue;
    const auto type = reduce_dtype(dtype, p.scalar_type());
    const auto key = std::make_tuple(type, p.scalar_type(), p.device().str());
    auto found = open.find(key);
    if (found == open.end() || bytes[found->second] >= bucket_bytes) {
      units.emplace_back();
      bytes.push_back(0);
      found = open.insert_or_assign(key, units.size() - 1).first;
    }
    units[found->second].params.push_back(static_cast<int64_t>(i));
    units[found->second].numels.push_back(p.numel());
    bytes[found->second] += p.numel() * static_cast<int64_t>(c10::elementSize(type));
  }
  return units;
}

GradSync::GradSync(Group& group, const std::vector<at::Tensor>& parameters,
                   config::ReduceDtype dtype, int64_t bucket_bytes)
    : GradSync(group, parameters, dtype, plan_buckets(parameters, dtype, bucket_bytes), {}, 1) {}

GradSync::GradSync(Group& group, const std::vector<at::Tensor>& parameters,
                   config::ReduceDtype dtype, const FlatLayout& layout,
                   std::vector<at::Tensor> shards)
    : GradSync(group, parameters, dtype, layout.units(), std::move(shards), layout.world_size()) {}

GradSync::GradSync(Group& group, const std::vector<at::Tensor>& parameters,
                   config::ReduceDtype dtype, const FlatLayout& layout,
                   std::vector<at::Tensor> shards, Accumulate accumulate)
    : GradSync(group, parameters, dtype, layout, std::move(shards)) {
  accumulate_ = std::move(accumulate);
}

GradSync::GradSync(Group& group, const std::vector<at::Tensor>& parameters,
                   config::ReduceDtype dtype, const std::vector<FlatUnit>& units,
                   std::vector<at::Tensor> shards, int64_t pad_to)
    : group_(group), dtype_(dtype), scatter_(!shards.empty()), params_(parameters) {
  bucket_of_.assign(params_.size(), 0);
  for (size_t b = 0; b < units.size(); ++b) {
    Bucket bucket;
    int64_t offset = 0;
    for (size_t k = 0; k < units[b].params.size(); ++k) {
      const auto i = static_cast<size_t>(units[b].params[k]);
      bucket.params.push_back(i);
      bucket.offsets.push_back(offset);
      offset += units[b].numels[k];
      bucket_of_[i] = b;
    }
    const auto& first = params_[bucket.params.front()];
    bucket.options = first.options().dtype(reduce_dtype(dtype, first.scalar_type()));
    bucket.size = (offset + pad_to - 1) / pad_to * pad_to;
    if (scatter_) {
      bucket.shard = shards[b];
    } else {
      bucket.buffer = at::empty({bucket.size}, bucket.options);
    }
    buckets_.push_back(std::move(bucket));
  }
  for (const auto& bucket : buckets_) {
    for (const size_t i : bucket.params) {
      torch::autograd::impl::set_post_acc_grad_hooks(
          params_[i], std::make_unique<ReadyHook>([this, i] { ready(i); }));
    }
  }
}

GradSync::~GradSync() {
  for (const auto& bucket : buckets_) {
    for (const size_t i : bucket.params) torch::autograd::impl::post_acc_grad_hooks(params_[i]).reset();
  }
}

void GradSync::arm(bool communicate) {
  std::lock_guard lock(mutex_);
  if (accumulate_) {
    finish_locked();
    if (step_begins_) {
      c10::NoGradGuard no_grad;
      for (auto& bucket : buckets_) bucket.shard.zero_();
      step_begins_ = false;
    }
  }
  armed_ = communicate;
  if (!communicate) return;
  next_bucket_ = 0;
  landed_ = 0;
  for (auto& bucket : buckets_) {
    bucket.pending = bucket.params.size();
    bucket.work.reset();
  }
}

void GradSync::ready(size_t param) {
  std::lock_guard lock(mutex_);
  if (!armed_) return;
  Bucket& bucket = buckets_[bucket_of_[param]];
  if (bucket.pending > 0) --bucket.pending;
  start_ready_buckets_locked();
}

// Every rank must start the same collectives in the same order, whatever order its hooks fire in.
void GradSync::start_ready_buckets_locked() {
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) {
    start(buckets_[next_bucket_++]);
  }
}

void GradSync::start(Bucket& bucket) {
  c10::NoGradGuard no_grad;
  // A precision stage may have changed the gradients' dtype (ZeRO-3 gathers in the new one).
  if (scatter_) {
    const auto& first = params_[bucket.params.front()];
    bucket.options = bucket.options.dtype(reduce_dtype(dtype_, first.scalar_type()));
  }
  if (!bucket.buffer.defined()) bucket.buffer = at::empty({bucket.size}, bucket.options);
  int64_t end = 0;
  for (size_t k = 0; k < bucket.params.size(); ++k) {
    auto& p = params_[bucket.params[k]];
    auto slot = bucket.buffer.narrow(0, bucket.offsets[k], p.numel());
    end = bucket.offsets[k] + p.numel();
    if (p.grad().defined()) {
      slot.copy_(p.grad().reshape(-1));
      // ZeRO-2 keeps no full gradient past this point: the copy is queued before the release.
      if (scatter_) p.mutable_grad() = at::Tensor();
    } else {
      slot.zero_();
    }
  }
  bucket.buffer.narrow(0, end, bucket.size - end).zero_();
  const auto index = static_cast<size_t>(&bucket - buckets_.data());
  if (accumulate_ && accumulate_->copied) accumulate_->copied(index);
  // Dividing first keeps a sum of large fp16-scaled gradients from overflowing.
  bucket.buffer.div_(static_cast<double>(group_.world_size()));
  if (!scatter_) {
    bucket.work = group_.all_reduce_async(bucket.buffer, Reduce::sum);
    return;
  }
  const bool direct = !accumulate_ && bucket.shard.scalar_type() == bucket.options.dtype().toScalarType() &&
                      bucket.shard.is_contiguous();
  bucket.received = direct ? bucket.shard : at::empty({bucket.shard.numel()}, bucket.options);
  bucket.work = group_.reduce_scatter_async(bucket.received, bucket.buffer,
                                            "the gradient reduce-scatter");
  // When communication falls behind backward, backward waits: buffers of every bucket in flight
  // at once would add up to a whole copy of the gradients, which stage 2 exists to avoid.
  const auto started = index + 1;
  while (started - landed_ > kScatterInFlight) land(buckets_[landed_++]);
}

void GradSync::land(Bucket& bucket) {
  c10::NoGradGuard no_grad;
  group_.wait(bucket.work, "the gradient reduce-scatter");
  bucket.work.reset();
  if (accumulate_) {
    bucket.shard.add_(bucket.received);
  } else if (!bucket.received.is_same(bucket.shard)) {
    bucket.shard.copy_(bucket.received);
  }
  bucket.received = at::Tensor();
  bucket.buffer = at::Tensor();
}

void GradSync::finish() {
  std::lock_guard lock(mutex_);
  finish_locked();
  step_begins_ = true;
}

void GradSync::finish_locked() {
  if (!armed_) return;
  armed_ = false;
  for (; next_bucket_ < buckets_.size(); ++next_bucket_) start(buckets_[next_bucket_]);
  c10::NoGradGuard no_grad;
  if (scatter_) {
    while (landed_ < buckets_.size()) land(buckets_[landed_++]);
    return;
  }
  for (auto& bucket : buckets_) {
    group_.wait(bucket.work, "the gradient all-reduce");
    bucket.work.reset();
    for (size_t k = 0; k < bucket.params.size(); ++k) {
      auto& p = params_[bucket.params[k]];
      const auto average = bucket.buffer.narrow(0, bucket.offsets[k], p.numel()).view(p.sizes());
      if (!p.grad().defined()) p.mutable_grad() = at::zeros_like(p);
      p.mutable_grad().copy_(average);
    }
  }
}

}  // namespace ampt::distributed
