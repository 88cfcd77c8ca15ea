#include "ampt/kernels/target_check.h"

#include "ampt/core/errors.h"

#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <fmt/format.h>
#include <torch/nn/functional/loss.h>

#include <limits>
#include <utility>

namespace ampt::kernels {
namespace {

thread_local TargetCheck* t_active = nullptr;

std::string outside_vocabulary(int64_t value, int64_t position, int64_t numel, int64_t classes,
                               int64_t count) {
  return fmt::format(
      "target {} (position {} of {}) is outside the vocabulary of {} classes: targets must be in "
      "[0, {}) or {} (ignored); {} of them are outside",
      value, position, numel, classes, classes, kIgnoreIndex, count);
}

// The entries of flat targets that are neither a class nor ignored.
torch::Tensor bad_entries(const torch::Tensor& flat, int64_t classes) {
  return flat.ne(kIgnoreIndex).logical_and_(flat.lt(0).logical_or_(flat.ge(classes)));
}

}  // namespace

TargetCheck::TargetCheck(const c10::Device& device, bool host_loop)
    : record_(torch::zeros({3}, torch::dtype(torch::kInt64).device(device))),
      host_loop_(host_loop && device.is_cpu()) {}

void TargetCheck::record(const torch::Tensor& targets, int64_t classes) {
  const auto flat = targets.flatten();
  const int64_t n = flat.numel();
  if (n == 0) return;
  numel_ = n;
  classes_ = classes;
  if (host_loop_ && flat.is_cpu()) {
    const auto values = flat.to(torch::kInt64).contiguous();
    const auto* v = values.data_ptr<int64_t>();
    auto* r = record_.data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      if (v[i] == kIgnoreIndex || (v[i] >= 0 && v[i] < classes)) continue;
      if (r[0] == 0) {
        r[1] = i;
        r[2] = v[i];
      }
      ++r[0];
    }
    return;
  }
  const auto bad = bad_entries(flat, classes);
  const auto count = bad.sum();
  // The first bad position (n when none) and the value there.
  const auto position =
      torch::where(bad, torch::arange(n, flat.options()), torch::full({}, n, flat.options())).min();
  const auto value = flat.index_select(0, position.clamp_max(n - 1).view({1})).squeeze(0);
  const auto first = record_[0].eq(0).logical_and(count.gt(0));
  record_.copy_(torch::stack({record_[0] + count, torch::where(first, position, record_[1]),
                              torch::where(first, value, record_[2])}));
}

std::string TargetCheck::error(int64_t count, int64_t position, int64_t value) const {
  return outside_vocabulary(value, position, numel_, classes_, count);
}

TargetCheckScope::TargetCheckScope(TargetCheck* check)
    : previous_(std::exchange(t_active, check)) {}

TargetCheckScope::~TargetCheckScope() { t_active = previous_; }

void check_targets(const torch::Tensor& targets, int64_t classes) {
  if (t_active != nullptr) {
    t_active->record(targets, classes);
    return;
  }
  if (targets.is_cuda() && c10::cuda::currentStreamCaptureStatusMayInitCtx() !=
                               c10::cuda::CaptureStatus::None) {
    return;
  }
  const auto bad = bad_entries(targets.flatten(), classes);
  if (!bad.any().item<bool>()) return;  // the one wait, on a GPU
  const auto flat = bad.nonzero();
  const int64_t at = flat[0].item<int64_t>();
  throw RuntimeError(outside_vocabulary(targets.flatten()[at].item<int64_t>(), at,
                                        targets.numel(), classes, flat.size(0)));
}

torch::Tensor checked_cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets) {
  const int64_t classes = logits.size(-1);
  check_targets(targets, classes);
  const auto bad = bad_entries(targets, classes);
  const auto safe = targets.masked_fill(bad, kIgnoreIndex);
  const auto loss = torch::nn::functional::cross_entropy(logits, safe);
  return loss + torch::where(bad.any(), std::numeric_limits<float>::quiet_NaN(), 0.0f);
}

}  // namespace ampt::kernels
