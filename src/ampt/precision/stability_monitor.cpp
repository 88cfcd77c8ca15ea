#include "ampt/precision/stability_monitor.h"

#include <c10/core/impl/VirtualGuardImpl.h>
#include <fmt/format.h>

#include <utility>

namespace ampt::precision {
namespace {

// The record each step copies to the host, as float64 values.
enum Field { kSkipped, kLossNonfinite, kBadGrads, kLastBadGrad, kConsecutive, kFloorHit, kFields };

// "blocks.3.mlp.c_fc" for "blocks.3.mlp.c_fc.weight": what keep_fp32_modules patterns name.
std::string module_of(const std::string& parameter) {
  const auto dot = parameter.rfind('.');
  return dot == std::string::npos ? parameter : parameter.substr(0, dot);
}

}  // namespace

std::string BadStep::what() const {
  std::vector<std::string> parts;
  if (weight_parameter.size() > 0) parts.push_back(fmt::format("non-finite weight '{}'", weight_parameter));
  if (loss_nonfinite) parts.emplace_back("non-finite loss");
  if (nonfinite_grads > 0) {
    parts.push_back(fmt::format("non-finite gradient in '{}' ({} of {} gradients)", grad_parameter,
                                nonfinite_grads, grads));
  }
  if (parts.empty()) parts.emplace_back("non-finite values");
  return fmt::format("{}", fmt::join(parts, "; "));
}

Diagnosis diagnose(const BadStep& bad, const RunFacts& facts) {
  const int64_t first = bad.step - bad.consecutive + 1;
  Diagnosis d;
  d.problem = bad.floor_hit
                  ? fmt::format("step {} overflowed with the loss scale already at min_loss_scale {:g}",
                                bad.step, facts.min_loss_scale)
                  : fmt::format("{} steps in a row were skipped (steps {}-{})", bad.consecutive,
                                first, bad.step);
  d.problem += fmt::format("; step {}: {}", bad.step, bad.what());
  const std::string module = module_of(bad.grad_parameter);
  // Only gradients that went bad in part of the model point at a module; when all of them are
  // inf/NaN the name says nothing about where the trouble arose.
  const bool localised = bad.nonfinite_grads > 0 && bad.nonfinite_grads < bad.grads;
  const std::string keep_fp32 =
      localised ? fmt::format(", or keep the module '{}' in fp32", module) : "";
  const double lower_lr = facts.lr / 10.0;

  if (!bad.weight_parameter.empty()) {
    d.next = fmt::format(
        "the weights diverged: lower the learning rate (--lr {:g}) and restart from a checkpoint "
        "saved before step {}",
        lower_lr, first);
  } else if (facts.loss_scaling && !facts.dynamic_scale) {
    d.next = fmt::format("the fixed loss scale {:g} overflows fp16: lower --loss_scale, or use 0 "
                         "for a dynamic scale",
                         facts.scale);
  } else if (facts.loss_scaling && !bad.floor_hit && first == facts.first_run_step &&
             !bad.loss_nonfinite && facts.scale > 1.0) {
    d.next = fmt::format(
        "no step has succeeded yet and the scale is still {:g} after backing off from {:g}: lower "
        "the initial scale (--grad_scaler_init {:g}) or raise --max_consecutive_skips",
        facts.scale, facts.init_scale, facts.scale);
  } else if (facts.loss_scaling && bad.loss_nonfinite) {
    d.next = fmt::format("the forward pass overflows fp16's range: switch --mixed_precision fp16 "
                         "to bf16 (fp32's range){}",
                         keep_fp32);
  } else if (facts.loss_scaling) {
    d.next = fmt::format("fp16's range is too small for these gradients even at loss scale {:g}: "
                         "switch --mixed_precision fp16 to bf16{}",
                         facts.scale, keep_fp32);
  } else if (first == 1) {
    d.next = fmt::format(
        "the very first step is not finite, before the learning rate could act: check the input "
        "data and the model's initialisation{}",
        facts.precision == "FP32" ? ""
                                  : "; train once with --mixed_precision no to see whether the "
                                    "precision is the cause");
  } else {
    d.next = fmt::format("lower the learning rate (--lr {:g}){}", lower_lr,
                         facts.precision == "FP32" ? "" : keep_fp32);
  }
  return d;
}

StabilityMonitor::StabilityMonitor(std::vector<torch::Tensor> params, std::vector<std::string> names,
                                   const torch::Device& device, int64_t max_consecutive_skips)
    : names_(std::move(names)),
      weights_(std::move(params)),
      weight_names_(names_),
      device_(device),
      max_consecutive_skips_(max_consecutive_skips),
      consecutive_(torch::zeros({}, torch::dtype(torch::kFloat32).device(device))),
      record_(torch::zeros({kFields}, torch::dtype(torch::kFloat64).device(device))) {
  for (auto& slot : slots_) {
    slot.host = torch::zeros({kFields}, torch::kFloat64);
    // Only pinned memory lets a CUDA copy to the host run without blocking the host.
    if (device_.is_cuda()) slot.host = slot.host.pin_memory();
  }
}

torch::Tensor StabilityMonitor::skip_flag(const torch::Tensor& loss, const torch::Tensor& found_inf) {
  loss_nonfinite_ = loss.detach().isfinite().logical_not().to(torch::kFloat32).to(found_inf.device());
  return torch::maximum(found_inf, loss_nonfinite_);
}

void StabilityMonitor::observe(const torch::Tensor& grad_norms, const torch::Tensor& floor_hit,
                               const torch::Tensor& skipped, std::vector<int64_t> grad_params) {
  // A graph replay does not call observe: the captured step's gradients are every step's.
  grad_params_ = std::move(grad_params);
  const auto bad_grads = grad_norms.isfinite().logical_not().to(torch::kFloat64);
  // 1-based position of the last non-finite gradient, 0 when there is none.
  const auto positions = torch::arange(1, bad_grads.numel() + 1, bad_grads.options());
  consecutive_.add_(1.0).mul_(skipped);
  const auto zero = torch::zeros({}, bad_grads.options());
  record_.copy_(torch::stack({skipped.to(torch::kFloat64), loss_nonfinite_.to(torch::kFloat64),
                              bad_grads.sum(), (bad_grads * positions).max(),
                              consecutive_.to(torch::kFloat64),
                              floor_hit.defined() ? floor_hit.to(torch::kFloat64) : zero}));
}

void StabilityMonitor::record(int64_t step) {
  if (slots_[next_].pending) drain(/*wait=*/false);  // the ring is full: drain() waits for the oldest
  Slot& slot = slots_[next_];
  slot.grad_params = grad_params_;
  slot.host.copy_(record_, /*non_blocking=*/true);
  if (device_.is_cuda()) {
    slot.copied.emplace(device_.type());
    slot.copied->record(c10::impl::VirtualGuardImpl(device_.type()).getStream(device_));
  }
  slot.step = step;
  slot.pending = true;
  next_ = (next_ + 1) % slots_.size();
}

std::vector<BadStep> StabilityMonitor::poll(bool wait) {
  drain(wait);
  return std::exchange(ready_, {});
}

void StabilityMonitor::drain(bool wait) {
  while (slots_[oldest_].pending) {
    Slot& slot = slots_[oldest_];
    // A full ring (the next record() would overwrite this slot) waits rather than drops.
    const bool full = oldest_ == next_;
    if (slot.copied) {
      if (wait || full) {
        slot.copied->synchronize();
      } else if (!slot.copied->query()) {
        break;
      }
    }
    if (slot.host.data_ptr<double>()[kSkipped] > 0.0) ready_.push_back(resolve(slot));
    slot.pending = false;
    slot.copied.reset();
    oldest_ = (oldest_ + 1) % slots_.size();
  }
}

BadStep StabilityMonitor::resolve(const Slot& slot) const {
  const double* v = slot.host.data_ptr<double>();
  BadStep bad;
  bad.step = slot.step;
  bad.loss_nonfinite = v[kLossNonfinite] > 0.0;
  bad.nonfinite_grads = static_cast<int64_t>(v[kBadGrads]);
  bad.grads = static_cast<int64_t>(slot.grad_params.size());
  if (const auto last = static_cast<size_t>(v[kLastBadGrad]); last > 0) {
    bad.grad_parameter = names_[static_cast<size_t>(slot.grad_params[last - 1])];
  }
  bad.consecutive = static_cast<int64_t>(v[kConsecutive]);
  bad.floor_hit = v[kFloorHit] > 0.0;
  bad.weight_parameter = first_nonfinite_weight();
  return bad;
}

// A host synchronisation, paid only for a bad step. The weights checked are the current ones, a
// step or so after the bad step: a weight that turned inf/NaN makes every later loss non-finite,
// so those steps are skipped and the weights stay as the bad step left them.
std::string StabilityMonitor::first_nonfinite_weight() const {
  if (weights_.empty()) return {};
  std::vector<torch::Tensor> finite;
  finite.reserve(weights_.size());
  for (const auto& w : weights_) finite.push_back(w.detach().isfinite().all());
  const auto host = torch::stack(finite).cpu();
  const bool* ok = host.data_ptr<bool>();
  for (size_t i = 0; i < weights_.size(); ++i) {
    if (!ok[i]) return weight_names_[i];
  }
  return {};
}

void StabilityMonitor::watch_weights(std::vector<torch::Tensor> weights, std::vector<std::string> names) {
  weights_ = std::move(weights);
  weight_names_ = std::move(names);
}

bool StabilityMonitor::must_stop(const BadStep& bad) const {
  return bad.floor_hit || (max_consecutive_skips_ > 0 && bad.consecutive >= max_consecutive_skips_);
}

}  // namespace ampt::precision
