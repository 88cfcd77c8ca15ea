// Gradient averaging and the agreed skip decision, with every rank a thread of this process.
#include "ampt/distributed/grad_sync.h"

#include "ampt/precision/autocast_guard.h"
#include "ampt/precision/loss_scaler.h"
#include "ampt/train/optimizer.h"
#include "dist_fixtures.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <mutex>

using ampt::distributed::GradSync;
using ampt::distributed::Group;
using ampt::distributed::Reduce;
using ampt::test::run_ranks;

namespace {

// A two-layer network as bare tensors, so every rank can hold an exact copy.
struct Net {
  torch::Tensor w1, b1, w2;
  std::vector<torch::Tensor> params() const { return {w1, b1, w2}; }
  torch::Tensor loss(const torch::Tensor& x, const torch::Tensor& y) const {
    return torch::mse_loss(torch::tanh(torch::linear(x, w1, b1)).matmul(w2.t()), y);
  }
  Net copy() const {
    return {w1.detach().clone().requires_grad_(), b1.detach().clone().requires_grad_(),
            w2.detach().clone().requires_grad_()};
  }
};

Net make_net() {
  torch::manual_seed(3);
  return Net{torch::randn({16, 4}).requires_grad_(), torch::randn({16}).requires_grad_(),
             torch::randn({2, 16}).requires_grad_()};
}

// The gradients one process gets from `micro` accumulated micro-batches over all of x.
std::vector<torch::Tensor> reference_grads(const Net& net, const torch::Tensor& x,
                                           const torch::Tensor& y, int64_t micro) {
  Net local = net.copy();
  const auto xs = x.chunk(micro), ys = y.chunk(micro);
  for (int64_t m = 0; m < micro; ++m) (local.loss(xs[m], ys[m]) / static_cast<double>(micro)).backward();
  std::vector<torch::Tensor> grads;
  for (const auto& p : local.params()) grads.push_back(p.grad().clone());
  return grads;
}

}  // namespace

TEST_CASE("bucketed gradient all-reduce equals one process with the global batch",
          "[dist][grad_sync]") {
  const int64_t world = GENERATE(2, 3);
  const int64_t micro = GENERATE(1, 2);
  const int64_t batch = 4;  // per rank and micro-batch
  const Net net = make_net();
  const auto x = torch::randn({world * batch * micro, 4});
  const auto y = torch::randn({world * batch * micro, 2});
  const auto expected = reference_grads(net, x, y, micro);

  std::mutex mutex;
  std::vector<std::vector<torch::Tensor>> results(static_cast<size_t>(world));
  run_ranks(world, [&](Group& group) {
    Net local = net.copy();
    // A tiny cap puts every parameter in a bucket of its own: buckets start in order as
    // backward produces them.
    GradSync sync(group, local.params(), ampt::config::ReduceDtype::grad, /*bucket_bytes=*/64);
    {
      std::lock_guard lock(mutex);  // Catch's assertions are not thread-safe
      CHECK(sync.bucket_count() == 3);
    }
    // Micro-batch m of the step is global batch m; this rank takes slice `rank` of it.
    const auto xs = x.chunk(micro * world), ys = y.chunk(micro * world);
    for (int64_t m = 0; m < micro; ++m) {
      sync.arm(m + 1 == micro);
      const auto part = m * world + group.rank();
      (local.loss(xs[part], ys[part]) / static_cast<double>(micro)).backward();
      if (m + 1 < micro) {
        // No communication before the last micro-batch: the gradient is still this rank's own.
        Net alone = net.copy();
        (alone.loss(xs[part], ys[part]) / static_cast<double>(micro)).backward();
        std::lock_guard lock(mutex);
        CHECK(torch::equal(local.w1.grad(), alone.w1.grad()));
      }
    }
    sync.finish();
    std::lock_guard lock(mutex);
    for (const auto& p : local.params()) results[group.rank()].push_back(p.grad().clone());
  });
  for (int64_t r = 0; r < world; ++r) {
    for (size_t i = 0; i < expected.size(); ++i) {
      CHECK(torch::allclose(results[r][i], expected[i], 1e-5, 1e-6));
      CHECK(torch::equal(results[r][i], results[0][i]));  // bit for bit on every rank
    }
  }
}

TEST_CASE("a bf16 all-reduce rounds the average but keeps every rank identical",
          "[dist][grad_sync]") {
  const Net net = make_net();
  const auto x = torch::randn({16, 4});
  const auto y = torch::randn({16, 2});
  const auto expected = reference_grads(net, x, y, 1);
  std::mutex mutex;
  std::vector<std::vector<torch::Tensor>> results(2);
  run_ranks(2, [&](Group& group) {
    Net local = net.copy();
    GradSync sync(group, local.params(), ampt::config::ReduceDtype::bf16);
    {
      std::lock_guard lock(mutex);  // Catch's assertions are not thread-safe
      CHECK(sync.bucket_count() == 1);
    }
    sync.arm(true);
    local.loss(x.chunk(2)[group.rank()], y.chunk(2)[group.rank()]).backward();
    sync.finish();
    std::lock_guard lock(mutex);
    for (const auto& p : local.params()) results[group.rank()].push_back(p.grad().clone());
  });
  for (size_t i = 0; i < expected.size(); ++i) {
    CHECK(results[0][i].dtype() == torch::kFloat32);
    CHECK(torch::allclose(results[0][i], expected[i], 2e-2, 1e-3));
    CHECK_FALSE(torch::equal(results[0][i], expected[i]));  // it did round
    CHECK(torch::equal(results[1][i], results[0][i]));
  }
}

TEST_CASE("found_inf is the maximum over ranks", "[dist][found_inf]") {
  std::vector<float> seen(3, -1.0F);
  run_ranks(3, [&](Group& group) {
    auto found_inf = torch::full({}, group.rank() == 1 ? 1.0F : 0.0F);
    group.all_reduce(found_inf, Reduce::max, "found_inf");
    seen[group.rank()] = found_inf.item<float>();
  });
  CHECK(seen == std::vector<float>{1.0F, 1.0F, 1.0F});
}

TEST_CASE("an fp16 overflow on one rank skips the step on every rank with the same scale",
          "[dist][found_inf]") {
  const Net net = make_net();
  const auto x = torch::randn({8, 4});
  const auto y = torch::randn({8, 2});
  struct Outcome {
    std::vector<float> found_inf;
    std::vector<float> scale;
    std::vector<torch::Tensor> after_skip, after_clean;
  };
  std::vector<Outcome> outcomes(2);
  run_ranks(2, [&](Group& group) {
    Net local = net.copy();
    ampt::config::Config config;
    config.optimizer = ampt::config::OptimizerKind::sgd;
    auto optimizer = ampt::train::make_optimizer(
        config, {{"w1", local.w1}, {"b1", local.b1}, {"w2", local.w2}});
    ampt::precision::LossScaler scaler({true, 1024.0, 2.0, 0.5, 2000}, torch::kCPU);
    GradSync sync(group, local.params(), ampt::config::ReduceDtype::fp32);
    auto& outcome = outcomes[group.rank()];
    for (int step = 0; step < 2; ++step) {
      auto xs = x.chunk(2)[group.rank()].clone();
      // Step 0 on rank 1 only: an input beyond fp16's range (65504), inf once autocast casts it.
      if (step == 0 && group.rank() == 1) xs[0][0] = 1e6F;
      sync.arm(true);
      {
        ampt::precision::AutocastGuard autocast(torch::kCPU, torch::kHalf, true);
        scaler.scale(local.loss(xs, y.chunk(2)[group.rank()])).backward();
      }
      sync.finish();
      std::vector<torch::Tensor> grads;
      for (const auto& p : local.params()) grads.push_back(p.grad());
      auto found_inf = scaler.unscale_(grads);
      group.all_reduce(found_inf, Reduce::max, "found_inf");
      optimizer->step(0.1, found_inf);
      scaler.update(found_inf);
      for (auto& g : grads) g.zero_();
      outcome.found_inf.push_back(found_inf.item<float>());
      outcome.scale.push_back(scaler.state().scale);
      auto& weights = step == 0 ? outcome.after_skip : outcome.after_clean;
      for (const auto& p : local.params()) weights.push_back(p.detach().clone());
    }
  });
  for (const auto& outcome : outcomes) {
    CHECK(outcome.found_inf == std::vector<float>{1.0F, 0.0F});
    CHECK(outcome.scale == std::vector<float>{512.0F, 512.0F});
    for (size_t i = 0; i < 3; ++i) {
      CHECK(torch::equal(outcome.after_skip[i], net.params()[i]));  // skipped
      CHECK_FALSE(torch::equal(outcome.after_clean[i], net.params()[i]));
    }
  }
  for (size_t i = 0; i < 3; ++i) CHECK(torch::equal(outcomes[1].after_clean[i], outcomes[0].after_clean[i]));
}
