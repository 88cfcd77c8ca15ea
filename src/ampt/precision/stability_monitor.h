// Watches every optimizer step for a non-finite loss, gradient or weight without making the step
// wait for the host, names the parameter where trouble showed first, and decides when a run has
// to stop (too many skipped steps in a row, or the loss scale stuck at its floor) with a
// diagnosis and the next thing to try.
#pragma once

#include <c10/core/Event.h>
#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ampt::precision {

// One skipped step, with names resolved on the host.
struct BadStep {
  int64_t step = 0;  // 1-based optimizer step
  bool loss_nonfinite = false;
  int64_t nonfinite_grads = 0;  // gradient tensors holding inf/NaN
  int64_t grads = 0;            // gradient tensors checked
  // The non-finite gradient nearest the loss: the last in registration (≈ forward) order, since
  // backward runs from the loss towards the inputs and an inf spreads from where it arose to
  // every layer before it. Empty when every gradient is finite.
  std::string grad_parameter;
  // The first parameter (registration order) whose weight is inf/NaN when the step is examined;
  // empty when all weights are finite.
  std::string weight_parameter;
  int64_t consecutive = 0;  // skipped steps in a row, this one included
  bool floor_hit = false;   // an overflow with the loss scale already at min_loss_scale
  // Targets outside the vocabulary seen by now (watch_targets), the first one's position in its
  // batch and its value: the data, not the numbers, went wrong.
  int64_t bad_targets = 0;
  int64_t target_position = 0;
  int64_t target_value = 0;

  // "non-finite loss; non-finite gradient in 'fc.weight' (2 of 6 gradients)"
  std::string what() const;
};

// What the diagnosis needs to know about the run besides the bad step.
struct RunFacts {
  std::string precision;      // "FP16", "BF16", "FP32"
  bool loss_scaling = false;  // a dynamic or static loss scale is applied
  bool dynamic_scale = false;  // the scale backs off on overflow (not --loss_scale)
  double scale = 1.0;         // the loss scale now
  double init_scale = 0.0;
  double min_loss_scale = 0.0;
  double lr = 0.0;               // the configured peak learning rate
  int64_t first_run_step = 1;    // the first step this process trained (after a resume: later)
  int64_t max_consecutive_skips = 0;
};

struct Diagnosis {
  std::string problem;  // what happened and the evidence
  std::string next;     // the concrete next step, chosen from the evidence
};

Diagnosis diagnose(const BadStep& step, const RunFacts& facts);

// Which of the gradient norms `norms` are infinite or NaN (bool, on their device): what the
// monitor records and what skips a step whose gradients no scaler unscaled.
torch::Tensor nonfinite_norms(const torch::Tensor& norms);

// Per step, on the device: a skip flag (non-finite gradients or loss), a consecutive-skip counter
// and the index of the offending gradient, packed into a few numbers. The steps' records gather
// on the device and travel to the host in one copy that does not block, at log steps (and at
// least every `flush_every` steps); the host reads them once the copy has landed. A normal step
// neither waits nor copies anything to the host; only a bad step pays for resolving names and
// checking the weights.
class StabilityMonitor {
 public:
  // `params` and `names` in the model's registration order (the order grads come in).
  StabilityMonitor(std::vector<torch::Tensor> params, std::vector<std::string> names,
                   const torch::Device& device, int64_t max_consecutive_skips,
                   int64_t flush_every = 1);

  // 0-dim float32 on the device: 1 when the step must be skipped (found_inf from unscaling, or a
  // non-finite loss), else 0. Call once per step before the optimizer step.
  torch::Tensor skip_flag(const torch::Tensor& loss, const torch::Tensor& found_inf);

  // Device only, after the scaler update: writes this step's record into a device buffer in
  // place (so a CUDA graph can hold it). `grad_norms` holds the norm of each gradient the step
  // had, the one of parameter `grad_params[i]` (an index into `params`) at i, ascending;
  // `floor_hit` is LossScaler::update's result (may be undefined); `skipped` is the skip flag
  // the step acted on (in a distributed run, the one all ranks agreed on).
  void observe(const torch::Tensor& grad_norms, const torch::Tensor& floor_hit,
               const torch::Tensor& skipped, std::vector<int64_t> grad_params);

  // Host, after the step was queued: keeps the step's record with the others on the device
  // (a copy there); with `flush`, or once `flush_every` are kept, starts copying them to the
  // host without waiting.
  void record(int64_t step, bool flush = false);

  // The bad steps among the records that have reached the host (all of them, flushed first, with
  // wait = true), oldest first.
  std::vector<BadStep> poll(bool wait = false);

  // True when `bad` calls for stopping the run.
  bool must_stop(const BadStep& bad) const;

  // The tensors a bad step's weight check reads, named (the parameters by default). ZeRO-3
  // hands its master shard's pieces: between steps a rank holds no whole weight, only its slices
  // of each, so a rank names a non-finite weight that its own slices hold.
  void watch_weights(std::vector<torch::Tensor> weights, std::vector<std::string> names);

  // The device record of bad targets (kernels/target_check.h: int64 [count, position, value]),
  // carried in every step's record from now on.
  void watch_targets(torch::Tensor record);

 private:
  // A step kept on the device, not yet copied to the host.
  struct Kept {
    int64_t step = 0;
    std::vector<int64_t> grad_params;  // parameter index of each checked gradient
  };
  // One copy of kept records to the host.
  struct Flight {
    torch::Tensor host;  // float64 [steps, fields]: see observe()
    std::optional<c10::Event> copied;
    std::vector<Kept> steps;
  };
  void flush();
  void drain(bool wait);  // resolves the flights that have landed (or all, with wait) into ready_
  BadStep resolve(const Kept& kept, const double* record) const;
  std::string first_nonfinite_weight() const;

  std::vector<std::string> names_;
  std::vector<torch::Tensor> weights_;
  std::vector<std::string> weight_names_;
  torch::Device device_;
  int64_t max_consecutive_skips_;
  torch::Tensor loss_nonfinite_;  // this step's, between skip_flag and observe
  std::vector<int64_t> grad_params_;  // the latest observe's, for the next record
  torch::Tensor consecutive_;     // 0-dim float32 on the device
  torch::Tensor zero_;            // 0-dim float32 on the device: floor_hit without a scaler
  torch::Tensor positions_;       // float32 1..gradients on the device, for observe
  torch::Tensor targets_;         // watch_targets's, or undefined
  torch::Tensor record_;          // the latest step's record, float64 on the device
  torch::Tensor kept_records_;    // [flush_every, fields] on the device: the steps kept
  std::vector<Kept> kept_;
  std::vector<Flight> flights_;   // oldest first
  std::vector<BadStep> ready_;    // resolved, not yet returned by poll()
};

}  // namespace ampt::precision
