// What the training loop does differently on several ranks, behind calls that do nothing in a
// single process: identical initial weights, gradient averaging (or ZeRO's sharding), agreed
// skip and stop decisions, and global metrics.
#pragma once

#include "ampt/config/config.h"
#include "ampt/core/named_tensors.h"
#include "ampt/device/device.h"
#include "ampt/distributed/sharded_parameters.h"

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ampt::distributed {

class Group;
class GradSync;
class Subgroup;
class ZeroShards;

// A distributed run on CUDA trains on GPU LOCAL_RANK; a process that sees a single GPU (Slurm's
// per-task binding) uses it. Throws RuntimeError when LOCAL_RANK has no GPU of its own.
device::DeviceChoice place_on_local_gpu(device::DeviceChoice chosen, const config::Launch& launch);

class DataParallel {
 public:
  // Joins the other ranks when config.launch is distributed; otherwise every call below is a
  // no-op (or the identity).
  DataParallel(const config::Config& config, const c10::Device& device);
  ~DataParallel();

  bool active() const { return group_ != nullptr; }
  bool is_main() const { return rank_ == 0; }
  int64_t rank() const { return rank_; }
  int64_t world_size() const { return world_size_; }
  // "2 ranks, gloo, torchrun rank 0 of 2 (...)"; empty in a single process.
  std::string describe() const;

  // The ZeRO stage in effect: config.zero_stage on several ranks, 0 in a single process (which
  // has nothing to shard).
  int64_t zero_stage() const { return group_ ? zero_stage_ : 0; }

  // Copies rank 0's model tensors to every rank and starts averaging the parameters' gradients
  // (under expert parallelism, leave the experts out of both: their ranks hold others).
  // Under ZeRO it also cuts this rank's shard: `masters` are the parameters' fp32 values (O2's
  // masters; the parameters themselves below O2), read once here; zero() then holds the shard.
  // Stage 3 also needs `blocks` (where each parameter belongs); it then keeps every block's
  // parameters released until it is gathered (sharded_parameters()), and a LoRA run's `frozen`
  // base likewise.
  void attach(const NamedTensors& model_tensors, const std::vector<at::Tensor>& parameters,
              const std::vector<at::Tensor>& masters, const ParameterBlocks* blocks = nullptr,
              const FrozenTensors& frozen = {});
  // Expert parallelism (config.expert_parallel N > 1, on several ranks): `expert_exchange()` is
  // this rank's group of N consecutive ranks, which divides every sparse layer's experts among
  // its members in rank order; `expert_replicas()` the ranks, one per such group, that hold the
  // same experts (null when there is one group): config::expert_layout's, as the model's shard
  // is. Both null otherwise.
  Subgroup* expert_exchange() { return expert_exchange_.get(); }
  Subgroup* expert_replicas() { return expert_replicas_.get(); }

  // This rank's ZeRO shards; null unless zero_stage() > 0 and attached.
  ZeroShards* zero() { return zero_.get(); }
  const ZeroShards* zero() const { return zero_.get(); }
  // Stage 3's gathered and released parameters; null below stage 3.
  ShardedParameters* sharded_parameters() { return sharded_.get(); }
  const ShardedParameters* sharded_parameters() const { return sharded_.get(); }
  // Around the backward passes of one optimizer step: communication happens only on the last.
  void before_backward(bool last_micro_batch);
  void after_backward();
  // found_inf := max over ranks, so every rank skips the same steps and keeps the same scale.
  void agree_found_inf(at::Tensor& found_inf);
  // Copies rank 0's buffers (BatchNorm running statistics, which each rank updates from its own
  // slice) to every rank, so that the ranks evaluate the model rank 0 saves.
  void share_buffers(const std::vector<at::Tensor>& buffers);
  // Rank 0's `flags` on every rank: a choice each rank made from its own measurements, made
  // one for all (`flags` itself in a single process).
  std::vector<bool> main_flags(const std::vector<bool>& flags, std::string_view what);
  // The mean of a tensor over ranks, elementwise (a new tensor; `value` itself in a single
  // process).
  at::Tensor mean(const at::Tensor& value);
  // value := its sum over ranks, in place, on its device (nothing in a single process).
  void sum(at::Tensor& value, std::string_view what);
  // A stop request (signal number) that every rank acts on at the same step; see Group.
  int agree_stop(int local_signal);
  // Rank 0 gets every rank's `text` (Group::gather_text); a single process gets its own.
  std::vector<std::string> gather_text(const std::string& key, const std::string& text,
                                       std::string_view what);
  // Checks that every rank ends with rank 0's parameters bit for bit (a divergence would mean a
  // broken all-reduce or nondeterministic data: a RuntimeError naming the rank and the largest
  // difference; stage 3 holds no whole parameters to compare), waits for every rank (rank 0's
  // last checkpoint is written), then stops watching them.
  void finish();

 private:
  config::ReduceDtype reduce_dtype_;
  int64_t zero_stage_ = 0;
  int64_t rank_ = 0;
  int64_t world_size_ = 1;
  std::string launch_;
  std::unique_ptr<Group> group_;
  std::unique_ptr<Subgroup> expert_exchange_;
  std::unique_ptr<Subgroup> expert_replicas_;
  std::unique_ptr<ZeroShards> zero_;
  std::unique_ptr<GradSync> grad_sync_;
  std::unique_ptr<ShardedParameters> sharded_;
  std::vector<at::Tensor> parameters_;
};

}  // namespace ampt::distributed
