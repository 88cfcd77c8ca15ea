// The training step as one function of device tensors — forward and backward over the
// micro-batches, unscale and inf check, clipping, optimizer step, scaler update — which runs
// eagerly or, with --cuda_graphs on a GPU, is captured once into a CUDA graph and replayed.
#pragma once

#include "ampt/data/batch.h"
#include "ampt/precision/loss_scaler.h"
#include "ampt/precision/stability_monitor.h"
#include "ampt/train/objective.h"
#include "ampt/train/optimizer.h"

#include <torch/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ampt::train {

// Where the gradients the optimizer steps with live, and what follows its step: the parameters'
// own gradients (O2: their fp32 masters') over whole weights, this rank's shard of them under
// ZeRO. The TrainState gives the step one (train_state.h); the step never asks which.
class StepGradients {
 public:
  virtual ~StepGradients() = default;
  struct Collected {
    std::vector<torch::Tensor> grads;
    std::vector<int64_t> params;  // the parameter each gradient (and its norm) belongs to
  };
  // After the last backward of the step.
  virtual Collected collect(const std::vector<torch::Tensor>& parameters) = 0;
  // Per-gradient norms of whole parameters (grad_clip.h's grad_norms; ZeRO: over every shard).
  virtual torch::Tensor norms(const std::vector<torch::Tensor>& grads);
  // precision::underflow_counts of the whole parameters' gradients (ZeRO: summed over the ranks'
  // shards).
  virtual torch::Tensor underflow(const std::vector<torch::Tensor>& grads, c10::ScalarType half);
  // After the optimizer's step: the model's weights follow the stepped ones.
  virtual void weights_stepped() {}
};

// The parameters' own gradients, stepped in place: what a step without a TrainState (tests) uses.
std::unique_ptr<StepGradients> own_gradients();
// The indices of `parameters` that hold a gradient (a parameter the forward did not use has none).
std::vector<int64_t> parameters_with_gradients(const std::vector<torch::Tensor>& parameters);

// What a step works on; the run owns all of it and outlives the step.
struct StepParts {
  // The forward under autocast: each micro-batch's loss, the mean over its units (objective.h).
  std::shared_ptr<Objective> objective;
  std::vector<torch::Tensor> parameters;
  precision::LossScaler* scaler = nullptr;
  // Null: the parameters' own gradients (own_gradients()).
  StepGradients* gradients = nullptr;
  Optimizer* optimizer = nullptr;
  double max_grad_norm = 0.0;   // 0: no clipping
  torch::Tensor overflow_steps;  // 0-dim, += found_inf every step
  // Folds a non-finite loss into the skip decision and keeps the step's record (device side).
  precision::StabilityMonitor* monitor = nullptr;
  // The half dtype whose gradient underflow eager log steps count, asked each step (a precision
  // schedule changes it); kFloat or unset: none.
  std::function<c10::ScalarType()> underflow_dtype;
  // Data parallelism (all optional): before each backward (true on the last micro-batch), after
  // the last one (gradients averaged over ranks), and found_inf made the same on every rank.
  std::function<void(bool last_micro_batch)> before_backward;
  std::function<void()> after_backward;
  // The step's loss is the mean over every unit (scored target, pair) of every micro-batch on
  // every rank: `units_over_ranks` sums this rank's count (a 0-dim int64 device tensor) over the
  // ranks in place, and `ranks` is what the gradient sync divides the gradients by. An objective
  // whose units are uniform (every target scored) needs neither count nor sum: each micro-batch's
  // share is one over their number.
  std::function<void(torch::Tensor& units)> units_over_ranks;
  int64_t ranks = 1;
  // Optional: told each step's gradients once backward has made them (--profile's census).
  std::function<void(const std::vector<torch::Tensor>& gradients)> gradients_ready;
  std::function<void(torch::Tensor& found_inf)> agree_found_inf;
};

// Device tensors, valid until the next step (a graph's replay overwrites them in place).
struct StepResult {
  // What this rank backpropagated: its scored targets' summed losses over the number of scored
  // targets in the whole step (all micro-batches, all ranks), times the ranks, whose gradients
  // the sync averages. Its mean over the ranks is the step's loss, the mean per scored target.
  torch::Tensor loss;
  // The objective's figures (objective.h), weighted as `loss` is: their mean over the ranks is the
  // step's mean per unit. Undefined for an objective without figures.
  torch::Tensor figures;
  torch::Tensor grad_norm;  // before clipping; undefined when neither clipped nor asked for
  // precision::underflow_counts of the scaled gradients; undefined unless an eager step was
  // asked for the grad norm (graph replays skip it: it would cost a pass over every gradient).
  torch::Tensor underflow;
};

// Why a run cannot use a CUDA graph for its step, or "" when it can. `packed`: its batches hold
// packed examples (data::Batch::positions).
std::string cuda_graph_obstacle(const c10::Device& device, bool grad_ckpt, double dropout,
                                bool packed);

class TrainStep {
 public:
  // `graphed`: capture the step after kWarmupSteps eager steps (the caller has checked
  // cuda_graph_obstacle). The eager steps, the capture and the replays are the same function.
  TrainStep(StepParts parts, bool graphed);
  ~TrainStep();
  TrainStep(const TrainStep&) = delete;
  TrainStep& operator=(const TrainStep&) = delete;

  // One optimizer step on these micro-batches (same shapes every step when graphed). A graphed
  // step always computes the grad norm.
  StepResult run(const std::vector<data::Batch>& micro_batches, double lr, bool want_grad_norm);

  bool captured() const;
  // The objective the step minimises, which evaluation asks too.
  Objective& objective() const { return *parts_.objective; }

  // PyTorch's recipe warms up three iterations on a side stream before capturing.
  static constexpr int kWarmupSteps = 3;

 private:
  // `capturing`: the step being recorded into the CUDA graph, which keeps its gradients.
  template <class Lr>
  StepResult body(const std::vector<data::Batch>& micro_batches, const Lr& lr, bool want_grad_norm,
                  bool want_underflow, bool capturing = false);
  void release_grads();

  struct Graph;  // CUDA-only state, defined in step.cpp
  StepParts parts_;
  std::unique_ptr<StepGradients> own_;  // where parts_ names no gradients
  std::unique_ptr<Graph> graph_;
};

}  // namespace ampt::train
