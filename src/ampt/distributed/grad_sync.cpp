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

namespace ampt::distributed {
namespace {

class ReadyHook : public torch::autograd::PostAccumulateGradHook {
 public:
  explicit ReadyHook(std::function<void()> on_ready) : on_ready_(std::move(on_ready)) {}
  void operator()(const torch::autograd::Variable&) override { on_ready_(); }

 private:
  std::function<void()> on_ready_;
};

c10::ScalarType reduce_dtype(config::AllreduceDtype choice, c10::ScalarType grad) {
  switch (choice) {
    case config::AllreduceDtype::fp32: return at::kFloat;
    case config::AllreduceDtype::bf16: return at::kBFloat16;
    case config::AllreduceDtype::grad: break;
  }
  return grad;
}

}  // namespace

GradSync::GradSync(Group& group, const std::vector<at::Tensor>& parameters,
                   config::AllreduceDtype dtype, int64_t bucket_bytes)
    : group_(group) {
  for (const auto& p : parameters) {
    if (p.requires_grad()) params_.push_back(p);
  }
  bucket_of_.resize(params_.size());
  // One open bucket per (all-reduce dtype, device); a bucket closes when it reaches the cap.
  std::map<std::pair<c10::ScalarType, std::string>, size_t> open;
  std::vector<int64_t> sizes;
  std::vector<at::TensorOptions> options;
  for (size_t i = params_.size(); i-- > 0;) {
    const auto& p = params_[i];
    const auto type = reduce_dtype(dtype, p.scalar_type());
    const auto key = std::make_pair(type, p.device().str());
    auto found = open.find(key);
    if (found == open.end() ||
        sizes[found->second] * static_cast<int64_t>(c10::elementSize(type)) >= bucket_bytes) {
      buckets_.emplace_back();
      sizes.push_back(0);
      options.push_back(p.options().dtype(type));
      found = open.insert_or_assign(key, buckets_.size() - 1).first;
    }
    Bucket& bucket = buckets_[found->second];
    bucket.params.push_back(i);
    bucket.offsets.push_back(sizes[found->second]);
    sizes[found->second] += p.numel();
    bucket_of_[i] = found->second;
  }
  for (size_t b = 0; b < buckets_.size(); ++b) buckets_[b].buffer = at::empty({sizes[b]}, options[b]);
  for (size_t i = 0; i < params_.size(); ++i) {
    torch::autograd::impl::set_post_acc_grad_hooks(
        params_[i], std::make_unique<ReadyHook>([this, i] { ready(i); }));
  }
}

GradSync::~GradSync() {
  for (auto& p : params_) torch::autograd::impl::post_acc_grad_hooks(p).reset();
}

void GradSync::arm(bool communicate) {
  std::lock_guard lock(mutex_);
  armed_ = communicate;
  if (!communicate) return;
  next_bucket_ = 0;
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
  for (size_t k = 0; k < bucket.params.size(); ++k) {
    const auto& p = params_[bucket.params[k]];
    auto slot = bucket.buffer.narrow(0, bucket.offsets[k], p.numel());
    if (p.grad().defined()) {
      slot.copy_(p.grad().reshape(-1));
    } else {
      slot.zero_();
    }
  }
  // Dividing first keeps a sum of large fp16-scaled gradients from overflowing.
  bucket.buffer.div_(static_cast<double>(group_.world_size()));
  bucket.work = group_.all_reduce_async(bucket.buffer, Reduce::sum);
}

void GradSync::finish() {
  std::lock_guard lock(mutex_);
  if (!armed_) return;
  armed_ = false;
  for (; next_bucket_ < buckets_.size(); ++next_bucket_) start(buckets_[next_bucket_]);
  c10::NoGradGuard no_grad;
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
