// ZeRO-3's block hooks on a real GPT, every rank a thread of this process (Gloo): the loss and
// every gradient slice equal one process's unsharded pass, with and without activation
// checkpointing, in fp32 and in bf16 autocast; only the root and two blocks are ever whole at
// once, and between steps nothing is.
#include "ampt/train/block_gather.h"

#include "ampt/distributed/grad_sync.h"
#include "ampt/distributed/process_group.h"
#include "ampt/distributed/sharded_parameters.h"
#include "ampt/distributed/zero_shards.h"
#include "ampt/models/gpt.h"
#include "ampt/precision/autocast_guard.h"
#include "ampt/precision/policy.h"
#include "distributed/dist_fixtures.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>

using ampt::FlatLayout;
using ampt::distributed::GradSync;
using ampt::distributed::Group;
using ampt::distributed::ParameterBlocks;
using ampt::distributed::ShardedParameters;
using ampt::distributed::ZeroShards;
using ampt::models::Gpt;
using ampt::models::GptDims;

namespace {

GptDims dims() {
  GptDims d;
  d.n_layer = 3;
  d.n_embd = 24;  // pieces then cross parameter boundaries at 2, 3 and 4 ranks
  d.n_head = 2;
  d.block_size = 8;
  d.vocab_size = 40;
  return d;
}

Gpt make_gpt(bool grad_ckpt) {
  torch::manual_seed(5);
  Gpt gpt(dims());
  gpt->set_grad_ckpt(grad_ckpt);
  // Hooked blocks run one by one: the reference does too (no residual adds fused across blocks).
  gpt->set_fused(false);
  gpt->train();
  return gpt;
}

struct Batch {
  torch::Tensor tokens, targets;
};

Batch batch() {
  torch::manual_seed(9);
  return {torch::randint(0, 40, {4, 8}), torch::randint(0, 40, {4, 8})};
}

struct Pass {
  double loss = 0.0;
  std::map<std::string, torch::Tensor> grads;
};

Pass unsharded(bool grad_ckpt, bool bf16) {
  auto gpt = make_gpt(grad_ckpt);
  const auto b = batch();
  torch::Tensor loss;
  {
    ampt::precision::AutocastGuard autocast(c10::kCPU, c10::kBFloat16, bf16);
    loss = gpt->loss(b.tokens, b.targets);
  }
  loss.backward();
  Pass pass{loss.item<double>(), {}};
  for (const auto& item : gpt->named_parameters()) pass.grads[item.key()] = item.value().grad().clone();
  return pass;
}

ampt::precision::PrecisionPolicy policy(bool bf16) {
  return ampt::precision::make_policy(bf16 ? ampt::config::MixedPrecision::bf16
                                           : ampt::config::MixedPrecision::no,
                                      ampt::config::OptLevel::O1);
}

// One rank's ZeRO-3 parts over its copy of the GPT, hooked into it; unhooked when destroyed.
struct ShardedGpt {
  ShardedGpt(Gpt& gpt, Group& group, bool bf16, ampt::config::ReduceDtype reduce) : gpt(gpt) {
    for (const auto& item : gpt->named_parameters()) {
      names.push_back(item.key());
      params.push_back(item.value());
    }
    const ampt::precision::PrecisionIslands islands;
    const auto blocks = ampt::train::parameter_blocks(*gpt, ampt::models::layer_inventory(gpt->dims()).blocks, names, params,
                                                      islands, policy(bf16),
                                                      ampt::config::ParamDtype::auto_select, false);
    zero = std::make_unique<ZeroShards>(
        group, 3, params, params,
        FlatLayout(ampt::distributed::plan_block_units(params, blocks), group.world_size()));
    sharded = std::make_unique<ShardedParameters>(group, *zero, params, blocks);
    sync = std::make_unique<GradSync>(
        group, params, reduce, zero->layout(), zero->unit_grad_slices(),
        GradSync::Accumulate{[this](std::size_t unit) { sharded->release_unit(unit); }});
    hooks = std::make_unique<ampt::train::BlockGather>(*sharded);
    gpt->set_block_hooks(hooks.get());
  }
  ~ShardedGpt() { gpt->set_block_hooks(nullptr); }

  // Each of this rank's gradient pieces against `reference` (whole gradients by name) x `times`.
  void check_grads(const std::map<std::string, torch::Tensor>& reference, double times,
                   double rtol) const {
    const auto& pieces = zero->pieces();
    for (size_t i = 0; i < pieces.size(); ++i) {
      const auto& name = names[static_cast<size_t>(pieces[i].param)];
      const auto expected =
          reference.at(name).reshape(-1).narrow(0, pieces[i].begin, pieces[i].count).to(torch::kFloat) * times;
      INFO(name << " [" << pieces[i].begin << ", +" << pieces[i].count << "): max difference "
                << (zero->grad_pieces()[i] - expected).abs().max().item<double>());
      CHECK(torch::allclose(zero->grad_pieces()[i], expected, rtol, 1e-7));
    }
  }

  Gpt& gpt;
  std::vector<std::string> names;
  std::vector<torch::Tensor> params;
  std::unique_ptr<ZeroShards> zero;
  std::unique_ptr<ShardedParameters> sharded;
  std::unique_ptr<GradSync> sync;
  std::unique_ptr<ampt::train::BlockGather> hooks;
};

}  // namespace

TEST_CASE("zero3: parameter_blocks puts each parameter in its block and gathers O1's Linears in "
          "the autocast dtype",
          "[dist][zero3]") {
  auto gpt = make_gpt(false);
  std::vector<std::string> names;
  std::vector<torch::Tensor> params;
  for (const auto& item : gpt->named_parameters()) {
    names.push_back(item.key());
    params.push_back(item.value());
  }
  const ampt::precision::PrecisionIslands islands;
  const auto blocks = ampt::train::parameter_blocks(*gpt, ampt::models::layer_inventory(gpt->dims()).blocks, names, params, islands,
                                                    policy(true), ampt::config::ParamDtype::auto_select,
                                                    /*o2=*/false);
  REQUIRE(blocks.count == 3);
  for (size_t i = 0; i < names.size(); ++i) {
    INFO(names[i]);
    const bool linear = names[i].find("c_attn") != std::string::npos ||
                        names[i].find("c_proj") != std::string::npos ||
                        names[i].find("c_fc") != std::string::npos;
    const auto expected_block = names[i].rfind("h.", 0) == 0 ? names[i][2] - '0' : -1;
    CHECK(blocks.block[i] == expected_block);
    CHECK(blocks.dtype[i] == (linear ? c10::kBFloat16 : c10::kFloat));
    CHECK(blocks.follows_compute[i] == linear);
  }
  // Units: each block's bf16 Linears and fp32 norms apart, last block first, the root last.
  const auto units = ampt::distributed::plan_block_units(params, blocks);
  REQUIRE(units.size() == 7);
  CHECK(blocks.block[static_cast<size_t>(units.front().params.front())] == 2);
  CHECK(blocks.block[static_cast<size_t>(units.back().params.front())] == -1);
  // An fp32 island (keep_fp32_modules) computes in fp32: it is gathered in fp32.
  const auto kept = ampt::precision::select_islands(*gpt, {"mlp.c_fc"}, /*norms=*/false);
  const auto with_island = ampt::train::parameter_blocks(*gpt, ampt::models::layer_inventory(gpt->dims()).blocks, names, params, kept,
                                                         policy(true), ampt::config::ParamDtype::auto_select,
                                                         /*o2=*/false);
  for (size_t i = 0; i < names.size(); ++i) {
    INFO(names[i]);
    if (names[i].find("mlp.c_fc") != std::string::npos) CHECK(with_island.dtype[i] == c10::kFloat);
    if (names[i].find("mlp.c_proj") != std::string::npos) CHECK(with_island.dtype[i] == c10::kBFloat16);
  }
}

TEST_CASE("zero3: a GPT through gathered blocks computes the unsharded loss and gradients",
          "[dist][zero3]") {
  const int64_t world = GENERATE(2, 4);
  const bool grad_ckpt = GENERATE(false, true);
  const bool bf16 = GENERATE(false, true);
  INFO(world << " ranks, grad_ckpt " << grad_ckpt << ", bf16 " << bf16);
  const auto reference = unsharded(grad_ckpt, bf16);
  // Built here, not in the rank threads, which would share the global generator.
  std::vector<Gpt> models;
  for (int64_t r = 0; r < world; ++r) models.push_back(make_gpt(grad_ckpt));
  const auto b = batch();
  std::mutex report;
  ampt::test::run_ranks(world, [&](Group& group) {
    // An fp32 reduce of identical gradients over a power-of-two world is exact.
    ShardedGpt rank(models[static_cast<size_t>(group.rank())], group, bf16,
                    ampt::config::ReduceDtype::fp32);
    auto& gpt = rank.gpt;
    auto& sharded = *rank.sharded;
    // Catch's assertions are not thread-safe: each rank asserts under the lock, never while a
    // collective is pending (the other ranks would wait for it forever).
    {
      std::lock_guard lock(report);
      CHECK(sharded.gathered_bytes() == 0);
    }

    rank.sync->arm(true);
    sharded.gather(sharded.root());
    torch::Tensor loss;
    {
      ampt::precision::AutocastGuard autocast(c10::kCPU, c10::kBFloat16, bf16);
      loss = gpt->loss(b.tokens, b.targets);  // every rank the same batch: the average is its gradient
    }
    loss.backward();
    rank.sync->finish();
    const auto root = sharded.block_bytes(sharded.root());
    const auto after_backward = sharded.gathered_bytes();
    sharded.release_all();
    std::lock_guard lock(report);
    // After backward only the root is left: each block went when its gradients were out.
    CHECK(after_backward == root);
    CHECK(sharded.gathered_bytes() == 0);

    std::vector<int64_t> sizes;
    for (int64_t k = 0; k < sharded.blocks(); ++k) sizes.push_back(sharded.block_bytes(k));
    std::sort(sizes.rbegin(), sizes.rend());
    // The root and two blocks at most (the one computing, the next one coming), and the
    // prefetch did overlap: more than the root and one block.
    CHECK(sharded.peak_gathered_bytes() <= root + sizes[0] + sizes[1]);
    CHECK(sharded.peak_gathered_bytes() > root + sizes[0]);
    CHECK(loss.item<double>() == reference.loss);
    rank.check_grads(reference.grads, 1.0, 0.0);
  });
}

TEST_CASE("zero3: micro-batches accumulate in the gradient shard and a new step starts it afresh",
          "[dist][zero3]") {
  const auto reference_once = unsharded(false, false);
  std::vector<Gpt> models;
  for (int r = 0; r < 2; ++r) models.push_back(make_gpt(false));
  const auto b = batch();
  std::mutex report;
  ampt::test::run_ranks(2, [&](Group& group) {
    ShardedGpt rank(models[static_cast<size_t>(group.rank())], group, false,
                    ampt::config::ReduceDtype::grad);
    for (int step = 0; step < 2; ++step) {
      for (int micro = 0; micro < 3; ++micro) {
        rank.sync->arm(micro == 2);
        rank.sharded->gather(rank.sharded->root());
        rank.gpt->loss(b.tokens, b.targets).backward();
      }
      rank.sync->finish();
      rank.sharded->release_all();
      // Three micro-batches of the same batch: three times its gradient, in both steps. INFO
      // too is Catch's and not thread-safe: the lock comes first and outlives it.
      std::lock_guard lock(report);
      INFO("step " << step);
      rank.check_grads(reference_once.grads, 3.0, 1e-5);
    }
  });
}
