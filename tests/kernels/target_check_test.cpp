// The targets check of a training step, on the device (on the CPU, in a loop on the host): no
// wait, the first bad target kept, the losses it would have spoiled made NaN instead of read
// outside a row.
#include "ampt/kernels/fused_classifier.h"
#include "ampt/kernels/target_check.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <cmath>

using ampt::kernels::kIgnoreIndex;
using ampt::kernels::TargetCheck;
using ampt::kernels::TargetCheckScope;

TEST_CASE("target check: in a training step bad targets are recorded on the device, the first "
          "kept, and their losses are NaN",
          "[kernels][target_check]") {
  // Both ways of recording: the CPU's loop on the host and the tensor operations a GPU runs.
  const bool host_loop = GENERATE(true, false);
  INFO("host loop " << host_loop);
  torch::manual_seed(2);
  const auto hidden = torch::randn({6, 8});
  const auto weight = torch::randn({12, 8});
  TargetCheck check(torch::kCPU, host_loop);
  const TargetCheckScope scope(&check);
  auto targets = torch::tensor(std::vector<int64_t>{1, 2, kIgnoreIndex, 3, 4, 5});
  const auto loss = [&] {
    return ampt::kernels::classifier_loss(hidden, weight, targets, {12, 4}).item<double>();
  };
  CHECK(std::isfinite(loss()));
  CHECK(torch::equal(check.values(), torch::zeros({3}, torch::kInt64)));
  targets[4] = 12;
  targets[5] = -3;
  // The fused head (a bad row's loss NaN, never read outside it) and ATen's cross-entropy alike.
  CHECK(std::isnan(loss()));
  const auto logits = hidden.mm(weight.t());
  CHECK(std::isnan(ampt::kernels::checked_cross_entropy(logits, targets).item<double>()));
  // Two batches of two bad targets each; the first's first is kept.
  CHECK(torch::equal(check.values(), torch::tensor(std::vector<int64_t>{4, 4, 12})));
  CHECK(check.error(4, 4, 12) ==
        "target 12 (position 4 of 6) is outside the vocabulary of 12 classes: targets must be in "
        "[0, 12) or -100 (ignored); 4 of them are outside");
}
