#include "ampt/distributed/data_parallel.h"

#include "ampt/core/errors.h"
#include "ampt/distributed/grad_sync.h"
#include "ampt/distributed/process_group.h"
#include "ampt/distributed/sharded_parameters.h"
#include "ampt/distributed/zero_shards.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAFunctions.h>
#include <fmt/format.h>

#include <algorithm>

namespace ampt::distributed {

device::DeviceChoice place_on_local_gpu(device::DeviceChoice chosen, const config::Launch& launch) {
  if (!launch.distributed() || !chosen.device.is_cuda()) return chosen;
  const int64_t visible = c10::cuda::device_count();
  if (visible > 1 && launch.local_rank >= visible) {
    throw RuntimeError(fmt::format(
        "local rank {} has no GPU of its own: {} GPUs are visible on this node; launch at most "
        "one rank per GPU",
        launch.local_rank, visible));
  }
  const auto index = static_cast<c10::DeviceIndex>(visible == 1 ? 0 : launch.local_rank);
  c10::cuda::set_device(index);
  chosen.device = c10::Device(c10::kCUDA, index);
  chosen.reason += fmt::format(" (local rank {})", launch.local_rank);
  return chosen;
}

namespace {

// The same bytes, as integers: NaN weights equal on every rank compare equal.
at::Tensor bits(const at::Tensor& t) {
  switch (t.element_size()) {
    case 2: return t.view(at::kShort);
    case 8: return t.view(at::kLong);
    default: return t.view(at::kInt);
  }
}

}  // namespace

DataParallel::DataParallel(const config::Config& config, const c10::Device& device)
    : reduce_dtype_(config.reduce_dtype),
      zero_stage_(config.zero_stage),
      rank_(config.launch.rank),
      world_size_(config.launch.world_size),
      launch_(config.launch.describe()) {
  if (!config.launch.distributed()) return;
  const auto experts = config::expert_layout(config.expert_parallel, config.launch);
  group_ = Group::connect(config, device);
  if (experts.count == 1) return;
  expert_exchange_ = group_->subgroup(fmt::format("experts-{}", experts.group), experts.exchange);
  if (experts.replicas.size() > 1) {
    expert_replicas_ = group_->subgroup(fmt::format("expert-replicas-{}", experts.shard), experts.replicas);
  }
}

DataParallel::~DataParallel() = default;

std::string DataParallel::describe() const {
  if (!group_) return {};
  return fmt::format("{} ranks, {} backend; this is {}", world_size_, group_->backend_name(),
                     launch_);
}

void DataParallel::attach(const NamedTensors& model_tensors,
                          const std::vector<at::Tensor>& parameters,
                          const std::vector<at::Tensor>& masters,
                          const ParameterBlocks* blocks, const FrozenTensors& frozen) {
  if (!group_) return;
  std::vector<at::Tensor> tensors;
  for (const auto& [name, tensor] : model_tensors) tensors.push_back(tensor);
  group_->broadcast(tensors, 0, "the broadcast of rank 0's initial weights");
  parameters_ = parameters;
  if (zero_stage_ == 0) {
    grad_sync_ = std::make_unique<GradSync>(*group_, parameters, reduce_dtype_);
    return;
  }
  if (zero_stage_ == 3) {
    if (blocks == nullptr) throw std::logic_error("ZeRO-3 attached without the parameters' blocks");
    zero_ = std::make_unique<ZeroShards>(*group_, zero_stage_, parameters, masters,
                                         FlatLayout(plan_block_units(parameters, *blocks), world_size_));
    sharded_ = std::make_unique<ShardedParameters>(*group_, *zero_, parameters, *blocks, frozen);
    grad_sync_ = std::make_unique<GradSync>(
        *group_, parameters, reduce_dtype_, zero_->layout(), zero_->unit_grad_slices(),
        GradSync::Accumulate{[this](std::size_t unit) { sharded_->release_unit(unit); }});
    return;
  }
  zero_ = std::make_unique<ZeroShards>(*group_, zero_stage_, parameters, masters,
                                       FlatLayout(plan_buckets(parameters, reduce_dtype_), world_size_));
  if (zero_stage_ == 1) {
    grad_sync_ = std::make_unique<GradSync>(*group_, parameters, reduce_dtype_);
  } else {
    grad_sync_ = std::make_unique<GradSync>(*group_, parameters, reduce_dtype_, zero_->layout(),
                                            zero_->unit_grad_slices());
  }
}

void DataParallel::before_backward(bool last_micro_batch) {
  // ZeRO-3 keeps no full gradient from one micro-batch to the next: each one is reduce-scattered.
  if (grad_sync_) grad_sync_->arm(last_micro_batch || zero_stage_ == 3);
}

void DataParallel::after_backward() {
  if (grad_sync_) grad_sync_->finish();
}

void DataParallel::agree_found_inf(at::Tensor& found_inf) {
  if (group_) group_->all_reduce(found_inf, Reduce::max, "the all-reduce of found_inf");
}

void DataParallel::share_buffers(const std::vector<at::Tensor>& buffers) {
  if (group_ && !buffers.empty()) group_->broadcast(buffers, 0, "the broadcast of rank 0's buffers");
}

std::vector<bool> DataParallel::main_flags(const std::vector<bool>& flags, std::string_view what) {
  if (!group_ || flags.empty()) return flags;
  return group_->broadcast_flags(flags, 0, what);
}

at::Tensor DataParallel::mean(const at::Tensor& value) {
  if (!group_) return value;
  auto total = value.detach().to(at::kFloat).clone();
  group_->all_reduce(total, Reduce::sum, "the all-reduce of the loss");
  return total / static_cast<double>(world_size_);
}

void DataParallel::sum(at::Tensor& value, std::string_view what) {
  if (group_) group_->all_reduce(value, Reduce::sum, what);
}

int DataParallel::agree_stop(int local_signal) {
  return group_ ? group_->agree_stop(local_signal) : local_signal;
}

std::vector<std::string> DataParallel::gather_text(const std::string& key, const std::string& text,
                                                   std::string_view what) {
  if (!group_) return {text};
  return group_->gather_text(key, text, what);
}

void DataParallel::finish() {
  if (!group_) return;
  if (!parameters_.empty() && !sharded_) {
    // A chunk at a time: a copy of every weight at once would be the run's largest allocation.
    double difference = 0.0;
    for (const auto& chunk : chunks(parameters_, kChunkBytes)) {
      std::vector<at::Tensor> mine;
      for (const auto& p : chunk) mine.push_back(p.detach().reshape(-1));
      const auto local = at::cat(mine);
      auto reference = local.clone();
      group_->broadcast({reference}, 0, "the final comparison of weights");
      if (!at::equal(bits(local), bits(reference))) {
        difference = std::max(difference, (local - reference).abs().max().item<double>());
      }
    }
    auto worst = at::zeros({2}, parameters_.front().options().dtype(at::kDouble));
    if (difference > 0.0) worst.fill_(difference).select(0, 1).fill_(rank_);
    group_->all_reduce(worst, Reduce::max, "the final comparison of weights");
    if (worst[0].item<double>() > 0.0) {
      throw RuntimeError(fmt::format(
          "the ranks' weights diverged: rank {}'s differ from rank 0's by up to {:.3g} (a bug: "
          "please report it with the configuration)",
          static_cast<int64_t>(worst[1].item<double>()), worst[0].item<double>()));
    }
  }
  group_->finish();
}

}  // namespace ampt::distributed
