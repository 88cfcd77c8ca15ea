// token_log_probs against log_softmax + gather with autograd's own backward, in float64: the
// values and the logits' gradients, across chunks, with ignored rows, and from bf16 logits.
#include "ampt/kernels/target_check.h"
#include "ampt/kernels/token_log_probs.h"

#include <catch2/catch.hpp>

namespace {

struct Gathered {
  torch::Tensor values;
  torch::Tensor grad;
};

// The log-probabilities of `targets` and the gradient of their weighted sum, by `f`.
template <class F>
Gathered gathered(const torch::Tensor& logits, const torch::Tensor& weights, F f) {
  auto x = logits.detach().clone().requires_grad_(true);
  const auto values = f(x);
  (values.to(torch::kFloat64) * weights).sum().backward();
  return {values.detach(), x.grad()};
}

}  // namespace

TEST_CASE("token_log_probs: autograd's log_softmax and gather, in chunks, ignored rows counting 0",
          "[kernels][preference]") {
  torch::manual_seed(0);
  const int64_t rows = 37;
  const int64_t vocab = 50;
  const auto logits = torch::randn({rows, vocab}, torch::kFloat64) * 3;
  auto targets = torch::randint(vocab, {rows}, torch::kInt64);
  targets.index_put_({torch::arange(0, rows, 5)}, ampt::kernels::kIgnoreIndex);
  const auto counted = targets.ne(ampt::kernels::kIgnoreIndex);
  const auto weights = torch::randn({rows}, torch::kFloat64);
  const auto reference = gathered(logits, weights, [&](const torch::Tensor& x) {
    return x.log_softmax(-1).gather(1, targets.clamp_min(0).unsqueeze(1)).squeeze(1) * counted;
  });
  for (const int64_t chunk : {0, 1, 8, 64}) {
    INFO("chunk rows " << chunk);
    const auto ours = gathered(logits.to(torch::kFloat32), weights, [&](const torch::Tensor& x) {
      return ampt::kernels::token_log_probs(x, targets, chunk);
    });
    CHECK(ours.values.dtype() == torch::kFloat32);
    CHECK(ours.grad.dtype() == torch::kFloat32);
    CHECK(torch::allclose(ours.values.to(torch::kFloat64), reference.values, 1e-5, 1e-5));
    CHECK(torch::allclose(ours.grad.to(torch::kFloat64), reference.grad, 1e-5, 1e-6));
    CHECK(ours.grad.index({torch::arange(0, rows, 5)}).abs().max().item<double>() == 0.0);
  }
  // bf16 logits: the softmax in float32 over the bf16 values, the gradient back in bf16.
  const auto half = logits.to(torch::kBFloat16);
  const auto from_half = gathered(half, weights, [&](const torch::Tensor& x) {
    return ampt::kernels::token_log_probs(x, targets, 8);
  });
  const auto half_reference = gathered(half.to(torch::kFloat64), weights, [&](const torch::Tensor& x) {
    return x.log_softmax(-1).gather(1, targets.clamp_min(0).unsqueeze(1)).squeeze(1) * counted;
  });
  CHECK(from_half.grad.dtype() == torch::kBFloat16);
  CHECK(torch::allclose(from_half.values.to(torch::kFloat64), half_reference.values, 1e-5, 1e-5));
  // The gradient rounds once, to bf16 (8 bits of mantissa).
  CHECK(torch::allclose(from_half.grad.to(torch::kFloat64), half_reference.grad, 1e-2, 1e-3));
}

TEST_CASE("token_log_probs: float32 logits are read, never written: two uses backpropagate",
          "[kernels][preference]") {
  // At a temperature too: the logits divided out of place (once they were divided in place, and
  // the backward recomputed the softmax from logits / temperature^2).
  for (const double temperature : {1.0, 0.7}) {
    INFO("temperature " << temperature);
    torch::manual_seed(1);
    const auto logits = torch::randn({6, 11}).requires_grad_(true);
    const auto before = logits.detach().clone();
    const auto first = torch::randint(11, {6}, torch::kInt64);
    const auto second = torch::randint(11, {6}, torch::kInt64);
    (ampt::kernels::token_log_probs(logits, first, 0, temperature).sum() +
     ampt::kernels::token_log_probs(logits, second, 0, temperature).sum())
        .backward();
    CHECK(torch::equal(logits.detach(), before));
    const auto x = before.clone().requires_grad_(true);
    const auto log_probs = (x / temperature).log_softmax(-1);
    (log_probs.gather(1, first.unsqueeze(1)).sum() + log_probs.gather(1, second.unsqueeze(1)).sum())
        .backward();
    CHECK(torch::allclose(logits.grad(), x.grad(), 1e-5, 1e-6));
  }
}

TEST_CASE("token_log_probs_and_entropies: the same log-probabilities and gradient, and each row's "
          "entropy of softmax(logits / temperature) as float64's, in chunks",
          "[kernels][grpo]") {
  torch::manual_seed(2);
  const int64_t rows = 29;
  const int64_t vocab = 40;
  const auto logits = torch::randn({rows, vocab}, torch::kFloat64) * 4;
  const auto targets = torch::randint(vocab, {rows}, torch::kInt64);
  const auto weights = torch::randn({rows}, torch::kFloat64);
  for (const double temperature : {1.0, 0.7}) {
    const auto logp = (logits / temperature).log_softmax(-1);
    const auto entropy = -(logp.exp() * logp).sum(-1);
    for (const int64_t chunk : {0, 1, 8}) {
      INFO("temperature " << temperature << ", chunk rows " << chunk);
      torch::Tensor entropies;
      const auto both = gathered(logits.to(torch::kFloat32), weights, [&](const torch::Tensor& x) {
        auto out = ampt::kernels::token_log_probs_and_entropies(x, targets, chunk, temperature);
        entropies = out.entropies;
        return out.log_probs;
      });
      const auto alone = gathered(logits.to(torch::kFloat32), weights, [&](const torch::Tensor& x) {
        return ampt::kernels::token_log_probs(x, targets, chunk, temperature);
      });
      CHECK(torch::equal(both.values, alone.values));
      CHECK(torch::equal(both.grad, alone.grad));
      CHECK_FALSE(entropies.requires_grad());
      CHECK(entropies.dtype() == torch::kFloat32);
      CHECK(torch::allclose(entropies.to(torch::kFloat64), entropy, 1e-5, 1e-5));
    }
  }
}
