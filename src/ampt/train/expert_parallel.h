// Expert parallelism (--expert_parallel N): each group of N consecutive ranks divides every
// sparse layer's experts among its members (models/moe.h cuts them), and the groups replicate one
// another as data parallelism does. What that changes beside the forward's all_to_all:
// - the experts stay out of the data-parallel all-reduce and of rank 0's broadcast;
// - an expert's gradient already sums every rank's loss of its group (the rows' gradients came
//   back through the all_to_all), so it is summed over the replicas and divided by the world
//   size, which makes it the average a single process's mean loss would give;
// - a gradient's norm and underflow count are the whole weight's, over the group's slices;
// - checkpoints hold whole experts: a save gathers them from the group, a restore (or a
//   pretrained load) keeps this rank's slice, so that any N resumes any other.
#pragma once

#include "ampt/config/config.h"
#include "ampt/core/named_tensors.h"
#include "ampt/distributed/data_parallel.h"
#include "ampt/models/moe.h"
#include "ampt/train/step.h"

#include <torch/nn/module.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ampt::distributed {
class Subgroup;
}

namespace ampt::train {

// The models' exchange over the ranks of `group` (c10d's all_to_all); it must outlive them.
c10::intrusive_ptr<models::ExpertExchange> subgroup_exchange(distributed::Subgroup& group);

// What expert parallelism cannot run, as one-line UsageErrors before any weights load: a model
// without experts, adapters on the experts (peft's layout stacks every expert's factors in one
// matrix).
void check_expert_parallel(const config::Config& config, const torch::nn::Module& module);

class ExpertParallel {
 public:
  // Null unless the run divides its experts (dist.expert_exchange()); else gives the model's
  // expert groups their exchange.
  static std::unique_ptr<ExpertParallel> make(distributed::DataParallel& dist,
                                              torch::nn::Module& module);
  ~ExpertParallel();

  bool is_expert(const torch::Tensor& parameter) const;
  // The slice this rank holds of the expert weight `name` (trained or frozen); null for
  // anything else.
  const models::ExpertSlice* slice(const std::string& name) const;

  // What the data-parallel side attaches: `tensors` or `parameters` without the experts'.
  NamedTensors without_experts(const NamedTensors& tensors) const;
  std::vector<torch::Tensor> without_experts(const std::vector<torch::Tensor>& parameters) const;
  // Copies the first replica's experts to the others (a no-op with one group of ranks).
  void share_experts(const NamedTensors& tensors);

  // ZeRO beside it: each replica of the group steps 1/R of every expert stack's rows (R
  // replicas) and holds only their optimizer state; the replicas all-gather the stepped rows
  // after each step. Returns what the optimizer steps instead of `weights` (the experts, named):
  // views of this rank's rows, whose gradients the step sets; `weights` themselves where there
  // is one replica or the rows do not divide among them.
  NamedTensors replica_shares(const NamedTensors& weights);
  // This rank's rows of the stack `name` that replica_shares gave it: {first, count} (all of
  // them where it shares none).
  std::pair<int64_t, int64_t> share_rows(const std::string& name) const;
  // How many replicas share the stacks' optimizer state (1: none).
  int64_t sharing_replicas() const;

  // The step's gradients over `inner`'s (the run's own, O2's masters, or ZeRO's shard of the
  // dense parameters, beside which the experts' are collected).
  StepGradients& gradients(StepGradients& inner);

  // A checkpoint's tensors (model and optimizer state, named as saved) with whole experts, in
  // host memory, on rank 0: its group's ranks call it together and send it their slices, one
  // tensor at a time (the others' tensors are returned as they are: they write nothing).
  NamedTensors whole(NamedTensors tensors) const;
  // A whole checkpoint's (or pretrained) tensors cut to this rank's experts.
  NamedTensors local(NamedTensors tensors) const;

  // "2 ranks divide each sparse layer's 8 experts: 4 each, by all_to_all; 2 replicas".
  std::string describe() const;

 private:
  ExpertParallel(distributed::Subgroup& exchange, distributed::Subgroup* replicas,
                 std::map<std::string, models::ExpertSlice> slices,
                 std::set<const void*> expert_parameters, int64_t world);
  class Gradients;

  distributed::Subgroup& exchange_;
  distributed::Subgroup* replicas_;
  // replica_shares's views, by the whole stack's TensorImpl; empty: no sharing.
  struct Share {
    std::string name;
    torch::Tensor whole;  // the stack
    torch::Tensor rows;   // a view of this rank's rows of it, which the optimizer steps
    int64_t first = 0, count = 0;
  };
  std::map<const void*, Share> shares_;
  // `value` := its sum over the replicas that share the stacks (nothing without sharing).
  void over_sharing_replicas(torch::Tensor& value, const char* what) const;
  std::map<std::string, models::ExpertSlice> slices_;
  std::set<const void*> expert_parameters_;  // by their TensorImpl
  int64_t world_;
  std::unique_ptr<Gradients> gradients_;
};

}  // namespace ampt::train
