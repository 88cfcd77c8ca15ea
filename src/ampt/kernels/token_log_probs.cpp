#include "ampt/kernels/token_log_probs.h"

#include "ampt/kernels/batch_invariant.h"
#include "ampt/kernels/fused_classifier.h"
#include "ampt/kernels/target_check.h"

#include <torch/autograd.h>

#include <algorithm>

namespace ampt::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Logits in float32 divided by the temperature (the sampler's and the trainer's one order). Float32
// logits are not copied by `to`: they are divided out of place, never in the caller's tensor (the
// objective reads it again for the entropy, and the backward recomputes from it).
torch::Tensor scaled(const torch::Tensor& logits, double temperature, bool copy = false) {
  auto x = logits.to(torch::kFloat32, /*non_blocking=*/false, copy);
  if (temperature == 1.0) return x;
  return x.is_same(logits) ? x.div(temperature) : x.div_(temperature);
}

class TokenLogProbs : public torch::autograd::Function<TokenLogProbs> {
 public:
  // {log-probabilities, entropies}: the entropies [rows] where `with_entropy`, else empty.
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& logits,
                               const torch::Tensor& targets, int64_t chunk, double temperature,
                               bool with_entropy) {
    const int64_t rows = logits.size(0);
    auto out = torch::zeros({rows}, logits.options().dtype(torch::kFloat32));
    auto lse = torch::empty({rows}, out.options());
    auto entropy = torch::empty({with_entropy ? rows : 0}, out.options());
    const auto counted = targets.ne(kIgnoreIndex);
    const auto safe = targets.clamp_min(0);
    for (int64_t r = 0; r < rows; r += chunk) {
      const int64_t end = std::min(rows, r + chunk);
      const auto x = scaled(logits.slice(0, r, end), temperature);
      const auto chunk_lse = batch_invariant() ? invariant_logsumexp(x) : x.logsumexp(-1);
      lse.slice(0, r, end).copy_(chunk_lse);
      const auto picked = x.gather(1, safe.slice(0, r, end).unsqueeze(1)).squeeze(1);
      out.slice(0, r, end).copy_((picked - chunk_lse).mul_(counted.slice(0, r, end)));
      if (with_entropy) {
        // -sum p·log p from the same float32 chunk and logsumexp: no second pass to float32.
        const auto logp = x - chunk_lse.unsqueeze(1);
        entropy.slice(0, r, end).copy_(logp.exp().mul_(logp).sum(-1).neg_());
      }
    }
    ctx->save_for_backward({logits, targets, lse});
    ctx->saved_data["chunk"] = chunk;
    ctx->saved_data["temperature"] = temperature;
    ctx->mark_non_differentiable({entropy});
    return {out, entropy};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& logits = saved[0];
    const auto& targets = saved[1];
    const auto& lse = saved[2];
    // d logp_t / d x = (onehot(t) - softmax(x / T)) / T, per counted row, times the incoming
    // gradient.
    const double temperature = ctx->saved_data["temperature"].toDouble();
    const auto g = grads[0].to(torch::kFloat32).mul(targets.ne(kIgnoreIndex)).div(temperature);
    const auto safe = targets.clamp_min(0);
    auto grad_logits = torch::empty_like(logits);
    const int64_t rows = logits.size(0);
    const int64_t chunk = ctx->saved_data["chunk"].toInt();
    for (int64_t r = 0; r < rows; r += chunk) {
      const int64_t end = std::min(rows, r + chunk);
      const auto gr = g.slice(0, r, end).unsqueeze(1);
      // A copy even of float32 logits: the saved logits may feed another backward too.
      auto grad = scaled(logits.slice(0, r, end), temperature, /*copy=*/true)
                      .sub_(lse.slice(0, r, end).unsqueeze(1))
                      .exp_()
                      .mul_(gr)
                      .neg_();
      grad.scatter_add_(1, safe.slice(0, r, end).unsqueeze(1), gr);
      grad_logits.slice(0, r, end).copy_(grad);
    }
    return {grad_logits, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

variable_list apply(const torch::Tensor& logits, const torch::Tensor& targets, int64_t chunk_rows,
                    double temperature, bool with_entropy) {
  return TokenLogProbs::apply(logits, targets,
                              chunk_rows > 0 ? chunk_rows : default_chunk_rows(logits.size(1)),
                              temperature, with_entropy);
}

}  // namespace

torch::Tensor token_log_probs(const torch::Tensor& logits, const torch::Tensor& targets,
                              int64_t chunk_rows, double temperature) {
  return apply(logits, targets, chunk_rows, temperature, false)[0];
}

LogProbsAndEntropies token_log_probs_and_entropies(const torch::Tensor& logits,
                                                   const torch::Tensor& targets,
                                                   int64_t chunk_rows, double temperature) {
  auto both = apply(logits, targets, chunk_rows, temperature, true);
  return {std::move(both[0]), std::move(both[1])};
}

}  // namespace ampt::kernels
