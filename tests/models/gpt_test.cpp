// The GPT model: shapes, causality, weight tying, initialisation, dropout, data checks, training.
#include "ampt/core/errors.h"
#include "ampt/models/registry.h"
#include "ampt/precision/autocast_guard.h"
#include "models/overfit.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <cmath>

using ampt::config::Config;
using ampt::config::MixedPrecision;
using ampt::data::DataSpec;
using ampt::data::Task;

namespace {

// --fused_kernels true or false.
ampt::config::AutoSwitch switched(bool on) {
  return on ? ampt::config::AutoSwitch::on : ampt::config::AutoSwitch::off;
}

constexpr int64_t kVocab = 32;
constexpr int64_t kContext = 16;
constexpr int64_t kGptWidth = 48;  // unlike kVocab, so that only the embedding is [kVocab, kGptWidth]

Config small_gpt_config() {
  Config config;
  config.model = "gpt";
  config.n_layer = 2;
  config.n_embd = kGptWidth;
  config.n_head = 4;
  config.block_size = kContext;
  config.vocab_size = kVocab;
  return config;
}

DataSpec token_blocks(int64_t block, int64_t vocab) {
  return {Task::language_model, {block}, vocab};
}

torch::Tensor random_tokens(int64_t batch, int64_t time) {
  return torch::randint(0, kVocab, {batch, time}, torch::kInt64);
}

}  // namespace

TEST_CASE("gpt: logits are [B, T, vocab] for any T up to the context", "[models][gpt]") {
  auto model = ampt::models::make_model(small_gpt_config(), token_blocks(kContext, kVocab));
  CHECK(model.forward(random_tokens(3, kContext)).sizes() ==
        torch::IntArrayRef({3, kContext, kVocab}));
  CHECK(model.forward(random_tokens(2, 5)).sizes() == torch::IntArrayRef({2, 5, kVocab}));
  CHECK_THROWS_AS(model.forward(random_tokens(1, kContext + 1)), ampt::RuntimeError);
  CHECK(model.tokens_per_sample == kContext);
  CHECK(model.architecture ==
        "n_layer 2, n_embd 48, n_head 4, block_size 16, vocab_size 32, dropout 0");
}

TEST_CASE("gpt: changing tokens after t never changes the logits at t or before", "[models][gpt]") {
  torch::manual_seed(3);
  auto model = ampt::models::make_model(small_gpt_config(), token_blocks(kContext, kVocab));
  model.module->eval();
  torch::NoGradGuard no_grad;
  const auto tokens = random_tokens(2, kContext);
  const auto logits = model.forward(tokens);
  for (int64_t t : {int64_t{0}, int64_t{6}, kContext - 2}) {
    INFO("t = " << t);
    auto changed = tokens.clone();
    changed.slice(1, t + 1).copy_((changed.slice(1, t + 1) + 1).remainder(kVocab));
    const auto changed_logits = model.forward(changed);
    CHECK(torch::allclose(changed_logits.slice(1, 0, t + 1), logits.slice(1, 0, t + 1), 0.0, 1e-6));
    // The test can see a change: the position right after t does move.
    CHECK_FALSE(torch::allclose(changed_logits.select(1, t + 1), logits.select(1, t + 1)));
  }
}

TEST_CASE("gpt: the head and the token embedding are one tensor", "[models][gpt]") {
  auto model = ampt::models::make_model(small_gpt_config(), token_blocks(kContext, kVocab));
  const auto params = model.module->named_parameters();
  // Exactly one [vocab, n_embd] matrix: the head holds no copy of its own.
  int vocab_matrices = 0;
  for (const auto& p : params)
    vocab_matrices += p.value().sizes() == torch::IntArrayRef({kVocab, kGptWidth});
  CHECK(vocab_matrices == 1);
  const auto& wte = params["wte.weight"];

  // Feed only tokens 0..3: any gradient on the rows of tokens 4.. can only come from the head.
  const auto tokens = torch::randint(0, 4, {2, 8}, torch::kInt64);
  model.forward(tokens).logsumexp(-1).sum().backward();
  CHECK(wte.grad().slice(0, 4).abs().sum().item<double>() > 0.0);

  // And editing such a row moves exactly that token's logit.
  torch::NoGradGuard no_grad;
  const auto before = model.forward(tokens);
  // One coordinate, not the whole row: the final LayerNorm's output sums to zero across the
  // width at initialisation (gain 1, bias 0), so adding a constant row moved the logit by
  // rounding alone, and on some CPUs by less than allclose's tolerance.
  wte[kVocab - 1][0].add_(1.0);
  const auto after = model.forward(tokens);
  CHECK_FALSE(torch::allclose(after.select(-1, kVocab - 1), before.select(-1, kVocab - 1)));
  CHECK(
      torch::allclose(after.slice(-1, 0, kVocab - 1), before.slice(-1, 0, kVocab - 1), 0.0, 1e-6));
}

TEST_CASE("gpt: GPT-2 initialisation", "[models][gpt]") {
  torch::manual_seed(5);
  Config config = small_gpt_config();
  config.n_layer = 4;
  config.n_embd = 128;
  config.block_size = 64;
  config.vocab_size = 256;
  auto model = ampt::models::make_model(config, token_blocks(64, 256));
  const double residual_std = 0.02 / std::sqrt(2.0 * 4);
  for (const auto& p : model.module->named_parameters()) {
    const std::string& name = p.key();
    const auto& value = p.value();
    INFO(name);
    const bool layer_norm = name.find("ln_") != std::string::npos;
    if (name.ends_with(".bias")) {
      CHECK(value.abs().max().item<double>() == 0.0);
    } else if (layer_norm) {
      CHECK(torch::equal(value, torch::ones_like(value)));
    } else {
      const double expected = name.ends_with("c_proj.weight") ? residual_std : 0.02;
      CHECK(value.std().item<double>() == Approx(expected).epsilon(0.05));
      CHECK(std::abs(value.mean().item<double>()) < 0.1 * expected);
    }
  }
}

TEST_CASE("gpt: dropout acts in training only", "[models][gpt]") {
  Config config = small_gpt_config();
  config.dropout = 0.2;
  auto model = ampt::models::make_model(config, token_blocks(kContext, kVocab));
  const auto tokens = random_tokens(2, kContext);
  torch::NoGradGuard no_grad;
  model.module->train();
  CHECK_FALSE(torch::equal(model.forward(tokens), model.forward(tokens)));
  model.module->eval();
  CHECK(torch::equal(model.forward(tokens), model.forward(tokens)));
}

TEST_CASE("gpt: data the model cannot hold is a usage error naming both values", "[models][gpt]") {
  const Config config = small_gpt_config();
  CHECK_THROWS_WITH(ampt::models::make_model(config, token_blocks(kContext, kVocab + 1)),
                    "the dataset's vocabulary of 33 tokens exceeds vocab_size 32 (model gpt): "
                    "vocab_size must be at least 33");
  CHECK_THROWS_WITH(ampt::models::make_model(config, token_blocks(kContext + 1, kVocab)),
                    "the dataset's blocks of 17 tokens exceed block_size 16 (model gpt): "
                    "block_size must be at least 17");
  CHECK_THROWS_AS(ampt::models::make_model(config, DataSpec{Task::classification, {16}, 10}),
                  ampt::UsageError);
  CHECK_THROWS_WITH(ampt::models::make_model(config, DataSpec{Task::classification, {16}, 10}),
                    "model gpt needs language-model token blocks; the dataset gives "
                    "classification samples of shape {16}");
  // Inconsistent settings are reported before any mismatch with the data.
  Config odd_width = config;
  odd_width.n_embd = 30;
  CHECK_THROWS_WITH(ampt::models::make_model(odd_width, DataSpec{Task::classification, {16}, 10}),
                    Catch::StartsWith("n_embd 30 is not divisible by n_head 4"));
  // A smaller vocabulary and shorter blocks than the model's are fine.
  CHECK_NOTHROW(ampt::models::make_model(config, token_blocks(8, 20)));
}

TEST_CASE("gpt: overfits one batch in fp32, bf16 and fp16", "[models][gpt]") {
  for (auto precision : {MixedPrecision::no, MixedPrecision::bf16, MixedPrecision::fp16}) {
    INFO("precision " << static_cast<int>(precision));
    torch::manual_seed(7);
    auto model = ampt::models::make_model(small_gpt_config(), token_blocks(kContext, kVocab));
    const auto tokens = random_tokens(4, kContext);
    const auto targets = random_tokens(4, kContext);
    const auto loss = ampt_test::overfit(model, tokens, targets, precision, 40, 1e-2);
    CHECK(loss.first == Approx(std::log(static_cast<double>(kVocab))).epsilon(0.1));
    CHECK(loss.last < 0.5 * loss.first);
  }
}

TEST_CASE("gpt: the fused head's loss and gradients equal the logits' cross_entropy",
          "[models][gpt][fused_classifier]") {
  const auto tokens = random_tokens(3, kContext + 1);
  const auto inputs = tokens.narrow(1, 0, kContext), targets = tokens.narrow(1, 1, kContext);
  std::vector<std::vector<torch::Tensor>> grads;
  std::vector<double> losses;
  for (const bool fused : {false, true}) {
    auto config = small_gpt_config();
    config.fused_kernels = switched(fused);
    torch::manual_seed(3);
    auto model = ampt::models::make_model(config, token_blocks(kContext, kVocab));
    const auto loss = model.loss({inputs, targets});
    loss.backward();
    losses.push_back(loss.item<double>());
    grads.emplace_back();
    for (const auto& p : model.module->parameters()) grads.back().push_back(p.grad().clone());
  }
  CHECK(losses[1] == Approx(losses[0]).epsilon(1e-6));
  // The plain path is the reference: cross_entropy of the [B, T, vocab] logits from forward().
  CHECK(losses[0] == Approx(torch::nn::functional::cross_entropy(
                                 [&] {
                                   auto config = small_gpt_config();
                                   torch::manual_seed(3);
                                   return ampt::models::make_model(config, token_blocks(kContext, kVocab))
                                       .forward(inputs)
                                       .flatten(0, 1);
                                 }(),
                                 targets.flatten())
                                 .item<double>())
                        .epsilon(1e-6));
  REQUIRE(grads[0].size() == grads[1].size());
  for (size_t i = 0; i < grads[0].size(); ++i) {
    INFO("parameter " << i);
    CHECK(torch::allclose(grads[1][i], grads[0][i], 1e-4, 1e-6));
  }
}

TEST_CASE("gpt: residual adds fused with the next LayerNorm give the blocks' own logits and "
          "gradients", "[models][gpt][add_layer_norm]") {
  const auto tokens = random_tokens(3, kContext);
  for (const bool bf16 : {false, true}) {
    INFO((bf16 ? "bf16 autocast" : "fp32"));
    std::vector<torch::Tensor> logits;
    std::vector<std::vector<torch::Tensor>> grads;
    for (const bool fused : {false, true}) {
      auto config = small_gpt_config();
      config.n_layer = 3;
      config.fused_kernels = switched(fused);
      torch::manual_seed(3);
      auto model = ampt::models::make_model(config, token_blocks(kContext, kVocab));
      torch::Tensor out;
      {
        ampt::precision::AutocastGuard autocast(torch::kCPU, torch::kBFloat16, bf16);
        out = model.forward(tokens);
      }
      torch::manual_seed(4);
      (out.to(torch::kFloat32) * torch::randn(out.sizes())).sum().backward();
      logits.push_back(out.detach());
      grads.emplace_back();
      for (const auto& p : model.module->parameters()) grads.back().push_back(p.grad().clone());
    }
    // The same operations on the same values, in the same order: the same logits.
    CHECK(torch::equal(logits[1], logits[0]));
    for (size_t i = 0; i < grads[0].size(); ++i) {
      INFO("parameter " << i);
      // Only the order in which autograd adds a sum's two gradients may differ.
      CHECK(torch::allclose(grads[1][i], grads[0][i], 1e-5, 1e-7));
    }
  }
}

TEST_CASE("gpt: padded targets (-100) are not scored, fused or not: the unpadded tokens' mean",
          "[models][gpt][fused_classifier][padding]") {
  // Three examples of 16, 5 and 9 tokens, padded to 16 as one document per example is.
  const std::vector<int64_t> lengths{kContext, 5, 9};
  const auto tokens = random_tokens(3, kContext + 1);
  auto inputs = tokens.narrow(1, 0, kContext).clone();
  auto targets = tokens.narrow(1, 1, kContext).clone();
  for (int64_t row = 0; row < 3; ++row) {
    const int64_t n = lengths[static_cast<size_t>(row)];
    inputs[row].narrow(0, n, kContext - n).fill_(7);  // the pad id: any token
    targets[row].narrow(0, n, kContext - n).fill_(-100);
  }
  for (const bool fused : {false, true}) {
    INFO("fused " << fused);
    auto config = small_gpt_config();
    config.fused_kernels = switched(fused);
    torch::manual_seed(3);
    auto model = ampt::models::make_model(config, token_blocks(kContext, kVocab));
    // The reference: each example alone, unpadded; the sum of its tokens' losses over the count.
    auto sum = torch::zeros({});
    int64_t count = 0;
    for (int64_t row = 0; row < 3; ++row) {
      const int64_t n = lengths[static_cast<size_t>(row)];
      const auto logits = model.forward(tokens[row].narrow(0, 0, n).unsqueeze(0)).flatten(0, 1);
      sum = sum + torch::nn::functional::cross_entropy(
                      logits, tokens[row].narrow(0, 1, n),
                      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
      count += n;
    }
    const auto reference = sum / static_cast<double>(count);
    reference.backward();
    std::vector<torch::Tensor> reference_grads;
    for (auto& p : model.module->parameters()) {
      reference_grads.push_back(p.grad().clone());
      p.mutable_grad().zero_();
    }
    const auto padded = model.loss({inputs, targets});
    CHECK(padded.item<double>() == Approx(reference.item<double>()).epsilon(1e-6));
    padded.backward();
    const auto params = model.module->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      INFO("parameter " << i);
      CHECK(torch::allclose(params[i].grad(), reference_grads[i], 1e-4, 1e-6));
    }
  }
}
