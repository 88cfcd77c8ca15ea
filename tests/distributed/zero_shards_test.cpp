// ZeRO's shards with every rank a thread of this process: the gradient slices each stage leaves
// a rank, the global norms (one operation over a rank's CPU pieces), the sharded AdamW step against the whole one, and how much of the
// optimizer state each rank holds.
#include "ampt/distributed/zero_shards.h"

#include "ampt/distributed/grad_sync.h"
#include "ampt/distributed/process_group.h"
#include "ampt/train/grad_clip.h"
#include "ampt/train/optimizer.h"
#include "ampt/train/zero_optimizer.h"
#include "dist_fixtures.h"

#include <ATen/record_function.h>
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <atomic>
#include <mutex>
#include <string_view>

using ampt::FlatLayout;
using ampt::distributed::GradSync;
using ampt::distributed::Group;
using ampt::distributed::ZeroShards;
using ampt::test::run_ranks;

namespace {

// Parameters whose sizes do not divide by 2, 3 or 4, so that pieces cross parameter boundaries
// and units need padding.
struct ShardedNet {
  torch::Tensor w1, b1, w2, b2;
  std::vector<torch::Tensor> params() const { return {w1, b1, w2, b2}; }
  std::vector<std::string> names() const { return {"w1", "b1", "w2", "b2"}; }
  torch::Tensor loss(const torch::Tensor& x, const torch::Tensor& y) const {
    return torch::mse_loss(torch::linear(torch::tanh(torch::linear(x, w1, b1)), w2, b2), y);
  }
  ShardedNet copy() const {
    auto c = [](const torch::Tensor& t) { return t.detach().clone().requires_grad_(); };
    return {c(w1), c(b1), c(w2), c(b2)};
  }
};

ShardedNet make_sharded_net() {
  torch::manual_seed(5);
  return ShardedNet{torch::randn({13, 5}).requires_grad_(), torch::randn({13}).requires_grad_(),
             torch::randn({3, 13}).requires_grad_(), torch::randn({3}).requires_grad_()};
}

// The average gradient one process gets over the whole batch.
std::vector<torch::Tensor> full_grads(const ShardedNet& net, const torch::Tensor& x, const torch::Tensor& y) {
  ShardedNet local = net.copy();
  local.loss(x, y).backward();
  std::vector<torch::Tensor> grads;
  for (const auto& p : local.params()) grads.push_back(p.grad().clone());
  return grads;
}

// A 48-byte bucket cap: b2 and w2 share a unit, b1 and w1 get one each.
FlatLayout layout_for(const ShardedNet& net, int64_t world) {
  return FlatLayout(ampt::distributed::plan_buckets(net.params(), ampt::config::ReduceDtype::grad, 48),
                    world);
}

}  // namespace

TEST_CASE("zero: each stage leaves a rank its slices of the averaged gradients",
          "[dist][zero]") {
  const int64_t world = GENERATE(2, 3, 4);
  const int64_t stage = GENERATE(1, 2);
  const ShardedNet net = make_sharded_net();
  const auto x = torch::randn({world * 4, 5});
  const auto y = torch::randn({world * 4, 3});
  const auto expected = full_grads(net, x, y);
  REQUIRE(layout_for(net, world).units().size() == 3);
  std::mutex mutex;
  int64_t checked = 0;
  run_ranks(world, [&](Group& group) {
    ShardedNet local = net.copy();
    const auto layout = layout_for(local, world);
    ZeroShards zero(group, stage, local.params(), local.params(), layout);
    std::unique_ptr<GradSync> sync =
        stage == 1 ? std::make_unique<GradSync>(group, local.params(), ampt::config::ReduceDtype::grad, 48)
                   : std::make_unique<GradSync>(group, local.params(), ampt::config::ReduceDtype::grad,
                                                layout, zero.unit_grad_slices());
    sync->arm(true);
    local.loss(x.chunk(world)[group.rank()], y.chunk(world)[group.rank()]).backward();
    sync->finish();
    const auto& grads = zero.collect_grads();
    std::lock_guard lock(mutex);  // Catch's assertions are not thread-safe
    for (const auto& p : local.params()) CHECK_FALSE(p.grad().defined());  // released
    for (size_t i = 0; i < zero.pieces().size(); ++i) {
      const auto& piece = zero.pieces()[i];
      const auto want = expected[piece.param].reshape(-1).narrow(0, piece.begin, piece.count);
      CHECK(torch::allclose(grads[i], want, 1e-5, 1e-6));
      checked += piece.count;
    }
  });
  CHECK(checked == 13 * 5 + 13 + 3 * 13 + 3);  // every element on exactly one rank
}

TEST_CASE("zero: global gradient norms match one process and find a NaN on any rank",
          "[dist][zero]") {
  const int64_t world = 3;
  const ShardedNet net = make_sharded_net();
  const auto x = torch::randn({12, 5});
  const auto y = torch::randn({12, 3});
  auto expected = full_grads(net, x, y);
  const auto expected_norms = ampt::train::grad_norms(expected);
  std::vector<torch::Tensor> norms(world), poisoned(world);
  run_ranks(world, [&](Group& group) {
    ShardedNet local = net.copy();
    ZeroShards zero(group, 1, local.params(), local.params(), layout_for(local, world));
    for (size_t i = 0; i < 4; ++i) local.params()[i].mutable_grad() = expected[i].clone();
    auto grads = zero.collect_grads();
    norms[group.rank()] = zero.grad_norms(grads);
    // Rank 2 alone holds a NaN, in its first piece.
    if (group.rank() == 2) grads.front()[0] = std::nan("");
    poisoned[group.rank()] = zero.grad_norms(grads);
  });
  const auto holder = FlatLayout(layout_for(net, world)).segments(2).front().param;
  for (int64_t r = 0; r < world; ++r) {
    CHECK(torch::allclose(norms[r], expected_norms, 1e-6, 0.0));
    for (int64_t p = 0; p < 4; ++p) CHECK(std::isnan(poisoned[r][p].item<float>()) == (p == holder));
  }
}

TEST_CASE("zero: a rank's float32 CPU pieces take their norms in one operation, not one per piece",
          "[dist][zero]") {
  const int64_t world = 3;
  const ShardedNet net = make_sharded_net();
  const auto grads = full_grads(net, torch::randn({12, 5}), torch::randn({12, 3}));
  // Any depth: ATen's foreach norm on a CPU calls linalg_vector_norm once per piece inside.
  static std::atomic<int> passes{0}, foreach_norms{0}, norms{0};
  passes = foreach_norms = norms = 0;
  std::vector<size_t> pieces(world);
  const auto handle = at::addGlobalCallback(
      at::RecordFunctionCallback([](const at::RecordFunction& fn)
                                     -> std::unique_ptr<at::ObserverContext> {
        const std::string_view name = fn.name();
        if (name == "ampt::gradient_norms") ++passes;
        if (name == "aten::_foreach_norm") ++foreach_norms;
        if (name == "aten::linalg_vector_norm" || name == "aten::norm") ++norms;
        return nullptr;
      }).scopes({at::RecordScope::FUNCTION, at::RecordScope::USER_SCOPE}));
  run_ranks(world, [&](Group& group) {
    ShardedNet local = net.copy();
    ZeroShards zero(group, 1, local.params(), local.params(), layout_for(local, world));
    for (size_t i = 0; i < 4; ++i) local.params()[i].mutable_grad() = grads[i].clone();
    pieces[group.rank()] = zero.collect_grads().size();
    zero.grad_norms(zero.grad_pieces());
  });
  at::removeCallback(handle);
  for (const auto n : pieces) CHECK(n >= 2);  // several pieces on every rank
  CHECK(passes == world);
  CHECK(foreach_norms == 0);
  CHECK(norms == 0);
}

TEST_CASE("zero: a sharded AdamW or SGD step and its all-gather equal the whole step",
          "[dist][zero]") {
  const int64_t world = GENERATE(2, 4);
  const auto kind = GENERATE(ampt::config::OptimizerKind::adamw, ampt::config::OptimizerKind::sgd);
  const ShardedNet net = make_sharded_net();
  ampt::config::Config config;
  config.optimizer = kind;
  config.momentum = 0.9;
  config.weight_decay = 0.1;
  // The whole step, three times, on gradients that change each step.
  ShardedNet whole = net.copy();
  auto optimizer = ampt::train::make_optimizer(
      config, {{"w1", whole.w1}, {"b1", whole.b1}, {"w2", whole.w2}, {"b2", whole.b2}});
  const auto no_inf = torch::zeros({});
  std::vector<std::vector<torch::Tensor>> grads;
  for (int step = 0; step < 3; ++step) {
    grads.push_back({});
    for (const auto& p : whole.params()) grads.back().push_back(torch::randn_like(p));
    for (size_t i = 0; i < 4; ++i) whole.params()[i].mutable_grad() = grads.back()[i];
    optimizer->step(0.01, no_inf);
  }
  std::vector<std::vector<torch::Tensor>> results(world);
  run_ranks(world, [&](Group& group) {
    ShardedNet local = net.copy();
    std::vector<bool> decay;
    for (const auto& p : local.params()) decay.push_back(p.dim() >= 2);
    ZeroShards zero(group, 1, local.params(), local.params(), layout_for(local, world));
    auto sharded = ampt::train::make_zero_optimizer(config, zero, local.names(), decay);
    for (const auto& step_grads : grads) {
      for (size_t i = 0; i < 4; ++i) local.params()[i].mutable_grad() = step_grads[i].clone();
      zero.collect_grads();
      sharded.optimizer->step(0.01, no_inf);
      zero.gather_weights();
    }
    for (const auto& p : local.params()) results[group.rank()].push_back(p.detach().clone());
  });
  for (int64_t r = 0; r < world; ++r) {
    for (size_t i = 0; i < 4; ++i) {
      INFO("rank " << r << ", " << net.names()[i]);
      CHECK(torch::allclose(results[r][i], whole.params()[i], 1e-6, 1e-7));
      CHECK(torch::equal(results[r][i], results[0][i]));  // every rank gathers the same weights
    }
  }
}

TEST_CASE("zero: each rank holds 1/N of the optimizer state and of the fp32 masters",
          "[dist][zero]") {
  const int64_t world = GENERATE(2, 4);
  const ShardedNet net = make_sharded_net();
  ampt::config::Config config;
  ShardedNet whole = net.copy();
  auto optimizer = ampt::train::make_optimizer(
      config, {{"w1", whole.w1}, {"b1", whole.b1}, {"w2", whole.w2}, {"b2", whole.b2}});
  int64_t full_bytes = 0;
  for (const auto& [name, t] : optimizer->state()) full_bytes += static_cast<int64_t>(t.nbytes());
  const int64_t numel = 13 * 5 + 13 + 3 * 13 + 3;
  const auto layout = layout_for(net, world);
  std::vector<int64_t> held(world), masters(world);
  run_ranks(world, [&](Group& group) {
    ShardedNet local = net.copy();
    std::vector<bool> decay(4, true);
    ZeroShards zero(group, 2, local.params(), local.params(), layout);
    auto sharded = ampt::train::make_zero_optimizer(config, zero, local.names(), decay);
    held[group.rank()] = sharded.bytes();
    masters[group.rank()] = static_cast<int64_t>(zero.master_shard().nbytes());
  });
  const int64_t moments = 8 * numel;  // two fp32 per element
  CHECK(full_bytes == moments + 4 * 4);  // and a step count per tensor
  const auto units = static_cast<int64_t>(layout.units().size());
  // 1/N of the moments, give or take the padding: less than one element per unit and rank.
  CHECK(layout.shard_numel() * world - numel < world * units);
  for (int64_t r = 0; r < world; ++r) {
    INFO("rank " << r);
    const auto pieces = static_cast<int64_t>(layout.segments(r).size());
    CHECK(held[r] == 8 * layout.shard_numel() + 4 * pieces);  // measured: the state's tensors
    CHECK(8 * layout.shard_numel() < moments / world + 8 * units);
    CHECK(masters[r] == 4 * layout.shard_numel());
  }
}
