#include "ampt/train/step.h"

#include "ampt/core/errors.h"
#include "ampt/precision/grad_underflow.h"
#include "ampt/train/grad_clip.h"
#include "ampt/train/step_phase.h"

#include <ATen/autocast_mode.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>


namespace ampt::train {

std::string cuda_graph_obstacle(const c10::Device& device, bool grad_ckpt, double dropout,
                                bool packed) {
  if (!device.is_cuda()) return "the run is on " + device.str() + ", CUDA graphs need a GPU";
  // Recomputed dropout restores generator states, which a graph capture cannot read.
  if (grad_ckpt && dropout > 0.0) return "grad_ckpt with dropout > 0 reads RNG states per step";
  // FlashAttention's grid is sized by the number of examples, which each batch sets anew.
  if (packed) return "packed examples change the attention's number of sequences every step";
  return "";
}

namespace {

// Work queued on `waiter` from now on starts after what `on` has queued so far.
void wait_for(const c10::cuda::CUDAStream& waiter, const c10::cuda::CUDAStream& on) {
  at::cuda::CUDAEvent event;
  event.record(on);
  event.block(waiter);
}

class OwnGradients final : public StepGradients {
 public:
  Collected collect(const std::vector<torch::Tensor>& parameters) override {
    Collected out{{}, parameters_with_gradients(parameters)};
    for (const auto i : out.params) out.grads.push_back(parameters[i].grad());
    return out;
  }
};

}  // namespace

torch::Tensor StepGradients::norms(const std::vector<torch::Tensor>& grads) {
  return grad_norms(grads);
}

torch::Tensor StepGradients::underflow(const std::vector<torch::Tensor>& grads, c10::ScalarType half) {
  return precision::underflow_counts(grads, half);
}

std::unique_ptr<StepGradients> own_gradients() { return std::make_unique<OwnGradients>(); }

std::vector<int64_t> parameters_with_gradients(const std::vector<torch::Tensor>& parameters) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (parameters[i].grad().defined()) out.push_back(static_cast<int64_t>(i));
  }
  return out;
}

struct TrainStep::Graph {
  at::cuda::CUDAGraph graph;
  c10::cuda::CUDAStream side_stream = c10::cuda::getStreamFromPool();
  int warmup_left = kWarmupSteps;
  bool captured = false;
  std::vector<data::Batch> inputs;  // static buffers: each step's batches are copied in
  torch::Tensor lr;                 // 0-dim float32 on the device, refilled before each replay
  StepResult result;                // the graph's outputs, rewritten by each replay
};

TrainStep::TrainStep(StepParts parts, bool graphed) : parts_(std::move(parts)) {
  if (parts_.gradients == nullptr) {
    own_ = own_gradients();
    parts_.gradients = own_.get();
  }
  if (graphed) graph_ = std::make_unique<Graph>();
}

TrainStep::~TrainStep() = default;

bool TrainStep::captured() const { return graph_ && graph_->captured; }

template <class Lr>
StepResult TrainStep::body(const std::vector<data::Batch>& micro_batches, const Lr& lr,
                           bool want_grad_norm, bool want_underflow, bool capturing) {
  StepResult result;
  // Each micro-batch's loss is the mean over its own units (scored targets, pairs), whose number
  // varies with instruction data (answers of any length): weighted by that number over the
  // step's total, the update is the same however the step's examples are split into
  // micro-batches and ranks (what transformers' num_items_in_batch does). Counted on the device,
  // so no step waits for the host. Where every target is scored that weight is the micro-batch
  // count, known without counting; so it is in a step of one micro-batch on one rank without
  // figures (the weight total / units is 1, and a loss divided by 1 is that loss, 0 / 0's NaN
  // included).
  const bool uniform = parts_.objective->uniform_units() ||
                       (micro_batches.size() == 1 && parts_.ranks == 1 &&
                        !parts_.units_over_ranks && parts_.objective->figure_names().empty());
  std::vector<torch::Tensor> units;
  torch::Tensor total;
  if (!uniform) {
    for (const auto& batch : micro_batches) units.push_back(parts_.objective->units(batch));
    total = units.size() == 1 ? units.front().clone() : at::stack(units).sum();
    if (parts_.units_over_ranks) parts_.units_over_ranks(total);
  }
  torch::Tensor figures;  // summed over this rank's units
  for (size_t m = 0; m < micro_batches.size(); ++m) {
    StepPhase forward("ampt::forward");
    const auto out = parts_.objective->loss(micro_batches[m]);
    // total / (units × ranks): exactly the micro-batch count when every micro-batch holds as
    // many units. The gradient sync's mean over ranks makes the weights sum to one.
    // (A lone micro-batch's loss is its own weighted loss: no division, no node for backward.)
    const auto weighted =
        uniform ? (micro_batches.size() == 1 ? out.loss
                                             : out.loss / static_cast<double>(micro_batches.size()))
                : out.loss / total.div(parts_.ranks > 1 ? units[m] * parts_.ranks : units[m]);
    result.loss = result.loss.defined() ? result.loss.add_(weighted.detach())
                                        : weighted.detach().clone();
    if (out.figures.defined()) figures = figures.defined() ? figures.add_(out.figures) : out.figures.clone();
    forward.end();
    StepPhase backward("ampt::backward");
    if (parts_.before_backward) parts_.before_backward(m + 1 == micro_batches.size());
    parts_.scaler->scale(weighted).backward();
  }
  // Sums over this rank's units, times the ranks over the step's units: means over the ranks.
  if (figures.defined()) result.figures = figures.mul_(static_cast<double>(parts_.ranks)).div_(total);
  StepPhase unscale("ampt::unscale");
  if (parts_.after_backward) parts_.after_backward();
  if (parts_.gradients_ready) {
    std::vector<torch::Tensor> made;
    for (const auto& p : parts_.parameters) {
      if (p.grad().defined()) made.push_back(p.grad());
    }
    parts_.gradients_ready(made);
  }
  auto [grads, grad_params] = parts_.gradients->collect(parts_.parameters);
  // Before unscaling: underflow is about the values backward produced, scale included.
  const auto underflow_dtype = want_underflow && parts_.underflow_dtype ? parts_.underflow_dtype()
                                                                        : c10::kFloat;
  if (underflow_dtype != c10::kFloat) {
    result.underflow =
        parts_.gradients->underflow(grads, underflow_dtype);
  }
  // A scaled step's gradients are divided by the scale, which GradScaler's fused kernel does while
  // it looks for inf and NaN. An unscaled one (bf16, fp32) has nothing to divide: the per-gradient
  // norms that clipping and the monitor need anyway find a non-finite gradient, without a pass
  // that rewrites every gradient times 1 (eager's bf16 loop has none).
  auto found_inf = parts_.scaler->enabled() ? parts_.scaler->unscale_(grads) : torch::Tensor();
  // Per-gradient norms, shared by clipping and the monitor (a non-finite norm marks the gradient).
  const auto norms = parts_.gradients->norms(grads);
  if (!found_inf.defined()) found_inf = any_nonfinite(norms);
  // A non-finite loss skips the step as non-finite gradients do.
  auto skip = parts_.monitor ? parts_.monitor->skip_flag(result.loss, found_inf) : found_inf;
  // Every rank must skip the same steps, or their weights and scales drift apart.
  if (parts_.agree_found_inf) parts_.agree_found_inf(skip);
  unscale.end();
  StepPhase clip("ampt::clip");
  if (parts_.max_grad_norm > 0.0) {
    result.grad_norm = clip_grad_norm_(grads, parts_.max_grad_norm, norms);
  } else if (want_grad_norm) {
    result.grad_norm = total_grad_norm_of(norms);
  }
  clip.end();
  StepPhase optimizer("ampt::optimizer");
  parts_.optimizer->step(lr, skip);
  parts_.gradients->weights_stepped();
  optimizer.end();
  StepPhase scaler("ampt::scaler_update");
  const auto floor_hit = parts_.scaler->update(skip);
  parts_.overflow_steps.add_(skip);
  scaler.end();
  StepPhase monitor("ampt::monitor");
  if (parts_.monitor) parts_.monitor->observe(norms, floor_hit, skip, grad_params);
  monitor.end();
  StepPhase zero("ampt::zero_grad");
  // Undefined gradients let the next backward's AccumulateGrad take its tensors as they are,
  // where zeroed ones cost a zeroing pass and an add into zeros per parameter (torch's
  // zero_grad(set_to_none=True)). A captured step keeps them: they are the graph-pool tensors
  // its backward took while capturing, which every replay writes afresh. (O2 released its half
  // gradients in the step already.)
  if (!capturing) release_grads();
  return result;
}

void TrainStep::release_grads() {
  for (auto& p : parts_.parameters) p.mutable_grad() = torch::Tensor();
}

StepResult TrainStep::run(const std::vector<data::Batch>& micro_batches, double lr,
                          bool want_grad_norm) {
  if (!graph_) return body(micro_batches, lr, want_grad_norm, want_grad_norm);
  auto& g = *graph_;
  auto current = c10::cuda::getCurrentCUDAStream();
  if (g.warmup_left > 0) {
    // Warm-up steps are real steps, run on the stream the capture will use so that the
    // allocator and cuBLAS workspaces it sees are already set up.
    --g.warmup_left;
    wait_for(g.side_stream, current);
    StepResult result;
    {
      c10::cuda::CUDAStreamGuard guard(g.side_stream);
      result = body(micro_batches, lr, /*want_grad_norm=*/true, /*want_underflow=*/false);
    }
    wait_for(current, g.side_stream);
    return result;
  }
  if (!g.captured) {
    for (const auto& batch : micro_batches) {
      g.inputs.push_back({batch.inputs.clone(), batch.targets.clone()});
    }
    g.lr = torch::full({}, lr, torch::dtype(torch::kFloat32).device(micro_batches.front().inputs.device()));
    wait_for(g.side_stream, current);
    {
      c10::cuda::CUDAStreamGuard guard(g.side_stream);
      // Cached casts made inside the capture would be graph-pool tensors read after it.
      const bool cache = at::autocast::is_autocast_cache_enabled();
      at::autocast::set_autocast_cache_enabled(false);
      // PyTorch's whole-network capture recipe: with no gradients going in, the captured
      // backward writes fresh graph-pool gradients, never adds into (and zeroes) kept ones.
      release_grads();
      // Thread-local: the loader's worker threads keep pinning host memory during the capture.
      g.graph.capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
      g.result = body(g.inputs, g.lr, /*want_grad_norm=*/true, /*want_underflow=*/false,
                      /*capturing=*/true);
      g.graph.capture_end();
      at::autocast::set_autocast_cache_enabled(cache);
    }
    wait_for(current, g.side_stream);
    g.captured = true;
  } else {
    if (micro_batches.size() != g.inputs.size() ||
        micro_batches.front().inputs.sizes() != g.inputs.front().inputs.sizes()) {
      throw RuntimeError("a CUDA graph replays the shapes it captured: this step has a different "
                         "batch; run without --cuda_graphs");
    }
    for (size_t i = 0; i < micro_batches.size(); ++i) {
      g.inputs[i].inputs.copy_(micro_batches[i].inputs, /*non_blocking=*/true);
      g.inputs[i].targets.copy_(micro_batches[i].targets, /*non_blocking=*/true);
    }
    g.lr.fill_(lr);
  }
  // Capturing records the work without doing it: the first replay is this step.
  g.graph.replay();
  return g.result;
}

}  // namespace ampt::train
