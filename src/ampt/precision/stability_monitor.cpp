#include "ampt/precision/stability_monitor.h"

#include <ATen/record_function.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <utility>

namespace ampt::precision {
namespace {

// The record of each step, as float64 values.
enum Field {
  kSkipped,
  kLossNonfinite,
  kBadGrads,
  kLastBadGrad,
  kConsecutive,
  kFloorHit,
  kBadTargets,
  kTargetPosition,
  kTargetValue,
  kFields
};

// Flights of records on their way to the host at most: a host that falls further behind waits.
constexpr size_t kFlights = 4;

// "blocks.3.mlp.c_fc" for "blocks.3.mlp.c_fc.weight": what keep_fp32_modules patterns name.
std::string module_of(const std::string& parameter) {
  const auto dot = parameter.rfind('.');
  return dot == std::string::npos ? parameter : parameter.substr(0, dot);
}

}  // namespace

std::string BadStep::what() const {
  std::vector<std::string> parts;
  if (bad_targets > 0) {
    parts.push_back(fmt::format("{} target{} outside the vocabulary", bad_targets,
                                bad_targets == 1 ? "" : "s"));
  }
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

torch::Tensor nonfinite_norms(const torch::Tensor& norms) {
  // A norm is not negative, so one that is not below infinity is infinite or NaN: one comparison
  // where isfinite is four operations (each a launch on a GPU).
  return norms.lt(std::numeric_limits<float>::infinity()).logical_not_();
}

StabilityMonitor::StabilityMonitor(std::vector<torch::Tensor> params, std::vector<std::string> names,
                                   const torch::Device& device, int64_t max_consecutive_skips,
                                   int64_t flush_every)
    : names_(std::move(names)),
      weights_(std::move(params)),
      weight_names_(names_),
      device_(device),
      max_consecutive_skips_(max_consecutive_skips),
      consecutive_(torch::zeros({}, torch::dtype(torch::kFloat32).device(device))),
      zero_(torch::zeros({}, torch::dtype(torch::kFloat32).device(device))),
      record_(torch::zeros({kFields}, torch::dtype(torch::kFloat64).device(device))),
      kept_records_(torch::zeros({std::max<int64_t>(1, flush_every), kFields},
                                 torch::dtype(torch::kFloat64).device(device))) {}

torch::Tensor StabilityMonitor::skip_flag(const torch::Tensor& loss, const torch::Tensor& found_inf) {
  // loss − loss is 0 for a finite loss and NaN for an infinite or NaN one: two operations where
  // isfinite is four (each a launch on a GPU).
  const auto value = loss.detach();
  loss_nonfinite_ = value.sub(value).ne(0).to(torch::kFloat32);
  if (loss_nonfinite_.device() != found_inf.device()) {
    loss_nonfinite_ = loss_nonfinite_.to(found_inf.device());
  }
  return torch::maximum(found_inf, loss_nonfinite_);
}

void StabilityMonitor::watch_targets(torch::Tensor record) { targets_ = std::move(record); }

void StabilityMonitor::observe(const torch::Tensor& grad_norms, const torch::Tensor& floor_hit,
                               const torch::Tensor& skipped, std::vector<int64_t> grad_params) {
  // A graph replay does not call observe: the captured step's gradients are every step's.
  grad_params_ = std::move(grad_params);
  const auto bad_grads = nonfinite_norms(grad_norms).to(torch::kFloat32);
  // 1-based position of each gradient, kept from step to step.
  if (!positions_.defined() || positions_.numel() != bad_grads.numel()) {
    positions_ = torch::arange(1, bad_grads.numel() + 1, bad_grads.options());
  }
  consecutive_.add_(1.0).mul_(skipped);
  // The fields in float32 (counts and positions, exact below 2^24), widened by the copy into the
  // float64 record; the targets' int64 record likewise (values up to 2^53 exactly).
  const auto as_float = [](const torch::Tensor& t) {
    return t.scalar_type() == torch::kFloat32 ? t : t.to(torch::kFloat32);
  };
  record_.narrow(0, 0, kBadTargets)
      .copy_(torch::stack({as_float(skipped), loss_nonfinite_, bad_grads.sum(),
                           bad_grads.mul(positions_).max(), consecutive_,
                           floor_hit.defined() ? as_float(floor_hit) : zero_}));
  if (targets_.defined()) record_.narrow(0, kBadTargets, kFields - kBadTargets).copy_(targets_);
}

void StabilityMonitor::record(int64_t step, bool flush_now) {
  // A copy on the device: a CUDA graph writes record_ in place, every replay.
  kept_records_[static_cast<int64_t>(kept_.size())].copy_(record_);
  kept_.push_back({step, grad_params_});
  if (flush_now || static_cast<int64_t>(kept_.size()) == kept_records_.size(0)) flush();
}

void StabilityMonitor::flush() {
  if (kept_.empty()) return;
  // The oldest flight's host buffer is reused: it must have landed and been read.
  if (flights_.size() == kFlights) drain(/*wait=*/true);
  Flight flight;
  flight.host = torch::empty(kept_records_.sizes(), torch::kFloat64);
  // Only pinned memory lets a CUDA copy to the host run without blocking the host.
  if (device_.is_cuda()) flight.host = flight.host.pin_memory();
  {
    // The run's one copy to the host between log steps, named for --profile's step census.
    RECORD_FUNCTION("ampt::copy_to_host", std::vector<c10::IValue>());
    flight.host.narrow(0, 0, static_cast<int64_t>(kept_.size()))
        .copy_(kept_records_.narrow(0, 0, static_cast<int64_t>(kept_.size())),
               /*non_blocking=*/true);
  }
  if (device_.is_cuda()) {
    flight.copied.emplace(device_.type());
    flight.copied->record(c10::impl::VirtualGuardImpl(device_.type()).getStream(device_));
  }
  flight.steps = std::exchange(kept_, {});
  flights_.push_back(std::move(flight));
}

std::vector<BadStep> StabilityMonitor::poll(bool wait) {
  if (wait) flush();
  drain(wait);
  return std::exchange(ready_, {});
}

void StabilityMonitor::drain(bool wait) {
  while (!flights_.empty()) {
    Flight& flight = flights_.front();
    if (flight.copied) {
      if (wait) {
        flight.copied->synchronize();
      } else if (!flight.copied->query()) {
        break;
      }
    }
    const double* rows = flight.host.data_ptr<double>();
    for (size_t i = 0; i < flight.steps.size(); ++i) {
      const double* record = rows + i * kFields;
      if (record[kSkipped] > 0.0) ready_.push_back(resolve(flight.steps[i], record));
    }
    flights_.erase(flights_.begin());
  }
}

BadStep StabilityMonitor::resolve(const Kept& kept, const double* v) const {
  BadStep bad;
  bad.step = kept.step;
  bad.loss_nonfinite = v[kLossNonfinite] > 0.0;
  bad.nonfinite_grads = static_cast<int64_t>(v[kBadGrads]);
  bad.grads = static_cast<int64_t>(kept.grad_params.size());
  if (const auto last = static_cast<size_t>(v[kLastBadGrad]); last > 0) {
    bad.grad_parameter = names_[static_cast<size_t>(kept.grad_params[last - 1])];
  }
  bad.consecutive = static_cast<int64_t>(v[kConsecutive]);
  bad.floor_hit = v[kFloorHit] > 0.0;
  bad.bad_targets = static_cast<int64_t>(v[kBadTargets]);
  bad.target_position = static_cast<int64_t>(v[kTargetPosition]);
  bad.target_value = static_cast<int64_t>(v[kTargetValue]);
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
