#include "ampt/train/objective.h"

#include "ampt/config/enum_names.h"
#include "ampt/kernels/target_check.h"
#include "ampt/kernels/token_log_probs.h"

#include <fmt/format.h>
#include <torch/nn/functional/activation.h>

#include <cmath>

namespace ampt::train {
namespace {

using Kind = config::Objective;
namespace F = torch::nn::functional;

class TokenCrossEntropy : public Objective {
 public:
  TokenCrossEntropy(TokenLoss loss, bool every_target_scored, std::vector<std::string> figure_names)
      : loss_(std::move(loss)), every_target_scored_(every_target_scored),
        figure_names_(std::move(figure_names)) {}

  torch::Tensor units(const data::Batch& batch) const override {
    return batch.targets.ne(kernels::kIgnoreIndex).sum();
  }
  ObjectiveLoss loss(const data::Batch& batch) override {
    if (figure_names_.empty()) return {loss_(batch, nullptr), {}};
    torch::Tensor figures;
    auto loss = loss_(batch, &figures);
    // Sums over the units, as every figure: the log divides by them.
    return {std::move(loss), figures.detach().to(torch::kFloat32) * units(batch).to(torch::kFloat32)};
  }
  const std::vector<std::string>& figure_names() const override { return figure_names_; }
  // Figures are weighted by units, which are then counted.
  bool uniform_units() const override { return every_target_scored_ && figure_names_.empty(); }
  std::string describe() const override { return ""; }

 private:
  TokenLoss loss_;
  bool every_target_scored_;
  std::vector<std::string> figure_names_;
};

// log(1 - exp(x)) for x < 0, without cancellation on either side of -ln 2 (TRL's log1mexp).
torch::Tensor log1mexp(const torch::Tensor& x) {
  return torch::where(x < -M_LN2, torch::log1p(-torch::exp(x)), torch::log(-torch::expm1(x)));
}

// Each pair's summed answer-token log-probabilities and answer lengths (float32), from rows
// (padded pairs: the chosen half first) or from runs of packed positions (Batch::pair_runs).
struct PairLogProbs {
  torch::Tensor chosen;
  torch::Tensor rejected;
  torch::Tensor chosen_length;
  torch::Tensor rejected_length;
};

// Which run of the packed batch each token is in: its sequence's index in `starts`' order.
torch::Tensor token_runs(const data::Batch& batch) {
  return batch.positions.flatten().eq(0).cumsum(0) - 1;
}

PairLogProbs sequence_log_probs(const torch::Tensor& logits, const data::Batch& batch) {
  const auto per_token = kernels::token_log_probs(logits.flatten(0, 1), batch.targets.flatten());
  const auto counted = batch.targets.flatten().ne(kernels::kIgnoreIndex).to(torch::kFloat32);
  if (!batch.pair_runs.defined()) {
    const auto rows = batch.targets.size(0);
    const auto n = rows / 2;
    const auto sums = per_token.view({rows, -1}).sum(1);
    const auto lengths = counted.view({rows, -1}).sum(1);
    return {sums.slice(0, 0, n), sums.slice(0, n), lengths.slice(0, 0, n), lengths.slice(0, n)};
  }
  const auto run = token_runs(batch);
  const auto runs = batch.starts.numel() - 1;
  const auto sums = torch::zeros({runs}, per_token.options()).index_add(0, run, per_token);
  const auto lengths = torch::zeros({runs}, counted.options()).index_add(0, run, counted);
  const auto chosen = batch.pair_runs.select(1, 0);
  const auto rejected = batch.pair_runs.select(1, 1);
  return {sums.index_select(0, chosen), sums.index_select(0, rejected),
          lengths.index_select(0, chosen), lengths.index_select(0, rejected)};
}

// ORPO's NLL: the chosen sequences' mean negative log-likelihood per token, prompt included (TRL
// scores the whole chosen sequence), every token after each sequence's first up to its last
// answer token (answers end their sequences).
torch::Tensor chosen_nll(const torch::Tensor& logits, const data::Batch& batch) {
  const auto& targets = batch.targets;
  torch::Tensor whole;
  torch::Tensor counted;  // tokens of chosen sequences
  if (!batch.pair_runs.defined()) {
    const auto n = targets.size(0) / 2;
    const auto length = targets.size(1);
    const auto position = torch::arange(length, targets.options());
    const auto last = (targets.ne(kernels::kIgnoreIndex) * position).amax(1, true);
    auto next = batch.inputs.roll(-1, 1);
    next.select(1, length - 1).copy_(targets.select(1, length - 1));
    whole = torch::where(position <= last, next, kernels::kIgnoreIndex);
    counted = torch::zeros_like(targets, torch::kBool);
    counted.slice(0, 0, n).fill_(true);
  } else {
    // Within a run the next input is the target; a run's last target is its answer's last token.
    const auto same_run = batch.positions.flatten().roll(-1).ne(0).view_as(targets);
    whole = torch::where(targets.ne(kernels::kIgnoreIndex), targets,
                         torch::where(same_run, batch.inputs.flatten().roll(-1).view_as(targets),
                                      kernels::kIgnoreIndex));
    auto chosen_run = torch::zeros({batch.starts.numel() - 1}, targets.options().dtype(torch::kBool));
    chosen_run.index_fill_(0, batch.pair_runs.select(1, 0), true);
    counted = chosen_run.index_select(0, token_runs(batch)).view_as(targets);
  }
  whole = torch::where(counted, whole, kernels::kIgnoreIndex);
  return -kernels::token_log_probs(logits.flatten(0, 1), whole.flatten()).sum() /
         whole.ne(kernels::kIgnoreIndex).sum().clamp_min(1);
}

class PreferenceLoss : public Objective {
 public:
  PreferenceLoss(const config::Config& config, PreferenceModels models)
      : kind_(config.objective), beta_(config.beta), label_smoothing_(config.label_smoothing),
        simpo_gamma_(config.simpo_gamma), orpo_lambda_(config.orpo_lambda),
        rpo_alpha_(config.rpo_alpha),
        models_(std::move(models)) {
    names_ = {"rewards/chosen", "rewards/rejected", "rewards/accuracies", "rewards/margins",
              "logps/chosen",   "logps/rejected"};
    if (kind_ == Kind::orpo) {
      names_.emplace_back("nll_loss");
      names_.emplace_back("log_odds_ratio");
      names_.emplace_back("log_odds_chosen");
    }
    if (rpo_alpha_ > 0.0) names_.emplace_back("nll_loss");
  }

  torch::Tensor units(const data::Batch& batch) const override {
    const auto pairs = batch.pair_runs.defined() ? batch.pair_runs.size(0) : batch.targets.size(0) / 2;
    return torch::full({}, pairs, torch::dtype(torch::kInt64).device(batch.targets.device()));
  }

  const std::vector<std::string>& figure_names() const override { return names_; }

  std::string describe() const override {
    switch (kind_) {
      case Kind::dpo:
        return fmt::format("dpo: DPO's sigmoid loss{}, beta {}{}; reference: {}",
                           label_smoothing_ > 0.0
                               ? fmt::format(" with label_smoothing {} (cDPO)", label_smoothing_)
                               : "",
                           beta_, rpo_term(), models_.reference_description);
      case Kind::ipo:
        return fmt::format("ipo: the squared loss of length-normalised log-ratios, beta {}{}; "
                           "reference: {}",
                           beta_, rpo_term(), models_.reference_description);
      case Kind::simpo:
        return fmt::format("simpo: length-normalised log-probabilities, beta {}, margin gamma {}{}; "
                           "reference-free",
                           beta_, simpo_gamma_,
                           label_smoothing_ > 0.0
                               ? fmt::format(", label_smoothing {}", label_smoothing_)
                               : "");
      case Kind::orpo:
        return fmt::format("orpo: the chosen answer's NLL plus lambda {} times the log odds ratio; "
                           "reference-free",
                           orpo_lambda_);
      case Kind::lm:
      case Kind::grpo: break;  // not preference objectives
    }
    return "";
  }

  ObjectiveLoss loss(const data::Batch& batch) override {
    const auto logits = models_.policy(batch);
    const auto policy = sequence_log_probs(logits, batch);
    auto chosen = policy.chosen;
    auto rejected = policy.rejected;
    const auto& chosen_length = policy.chosen_length;
    const auto& rejected_length = policy.rejected_length;
    const auto n = chosen.size(0);
    torch::Tensor losses;
    torch::Tensor chosen_reward;
    torch::Tensor rejected_reward;
    std::vector<torch::Tensor> extra;
    if (config::needs_reference(kind_)) {
      torch::Tensor reference;  // [n, 2]
      if (models_.reference_table.defined()) {
        reference = models_.reference_table.index_select(0, batch.pair_ids);
      } else {
        torch::NoGradGuard no_grad;
        reference = pair_log_probs(models_.reference(batch), batch);
      }
      const auto chosen_ratio = chosen - reference.select(1, 0);
      const auto rejected_ratio = rejected - reference.select(1, 1);
      if (kind_ == Kind::dpo) {
        losses = sigmoid_loss(beta_ * (chosen_ratio - rejected_ratio));
      } else {
        // TRL normalises IPO's log-ratios by the answers' lengths (confirmed with its authors).
        const auto delta = chosen_ratio / chosen_length.clamp_min(1.0) -
                           rejected_ratio / rejected_length.clamp_min(1.0);
        losses = (delta - 1.0 / (2.0 * beta_)).square();
      }
      if (rpo_alpha_ > 0.0) {
        // TRL's "sft" loss: one mean over the micro-batch's chosen answer tokens (ORPO's NLL also
        // scores the prompt).
        const auto nll = -chosen.sum() / chosen_length.sum().clamp_min(1.0);
        losses = losses + rpo_alpha_ * nll;
        extra = {nll.detach() * static_cast<double>(n)};
      }
      chosen_reward = beta_ * chosen_ratio.detach();
      rejected_reward = beta_ * rejected_ratio.detach();
    } else {
      // SimPO and ORPO compare each answer's mean log-probability per token.
      chosen = chosen / chosen_length.clamp_min(1.0);
      rejected = rejected / rejected_length.clamp_min(1.0);
      if (kind_ == Kind::simpo) {
        losses = sigmoid_loss(beta_ * ((chosen - rejected) - simpo_gamma_ / beta_));
        chosen_reward = beta_ * chosen.detach();
        rejected_reward = beta_ * rejected.detach();
      } else {
        const auto log_odds = (chosen - rejected) - (log1mexp(chosen) - log1mexp(rejected));
        const auto ratio = F::logsigmoid(log_odds);
        // One mean over the micro-batch's chosen tokens, as TRL's cross_entropy.
        const auto nll = chosen_nll(logits, batch);
        losses = nll - orpo_lambda_ * ratio;
        chosen_reward = orpo_lambda_ * chosen.detach();
        rejected_reward = orpo_lambda_ * rejected.detach();
        // TRL's names: log_odds_ratio is the mean of logσ(log odds), log_odds_chosen of the odds.
        extra = {nll.detach() * static_cast<double>(n), ratio.detach().sum(),
                 log_odds.detach().sum()};
      }
    }
    std::vector<torch::Tensor> figures = {
        chosen_reward.sum(),
        rejected_reward.sum(),
        (chosen_reward > rejected_reward).sum().to(torch::kFloat32),
        (chosen_reward - rejected_reward).sum(),
        chosen.detach().sum(),
        rejected.detach().sum()};
    figures.insert(figures.end(), extra.begin(), extra.end());
    return {losses.mean(), torch::stack(figures)};
  }

 private:
  std::string rpo_term() const {
    return rpo_alpha_ > 0.0
               ? fmt::format(", plus {} times the chosen answer's NLL (RPO)", rpo_alpha_)
               : "";
  }

  // -log σ(x), or cDPO's expectation over labels flipped with probability label_smoothing.
  torch::Tensor sigmoid_loss(const torch::Tensor& x) const {
    auto loss = -F::logsigmoid(x);
    if (label_smoothing_ > 0.0) {
      loss = loss * (1.0 - label_smoothing_) - F::logsigmoid(-x) * label_smoothing_;
    }
    return loss;
  }

  Kind kind_;
  double beta_;
  double label_smoothing_;
  double simpo_gamma_;
  double orpo_lambda_;
  double rpo_alpha_;
  PreferenceModels models_;
  std::vector<std::string> names_;
};

}  // namespace

std::unique_ptr<Objective> token_cross_entropy(TokenLoss loss, bool every_target_scored,
                                               std::vector<std::string> figure_names) {
  return std::make_unique<TokenCrossEntropy>(std::move(loss), every_target_scored,
                                             std::move(figure_names));
}

std::unique_ptr<Objective> preference_objective(const config::Config& config,
                                                       PreferenceModels models) {
  return std::make_unique<PreferenceLoss>(config, std::move(models));
}

torch::Tensor pair_log_probs(const torch::Tensor& logits, const data::Batch& batch) {
  const auto pairs = sequence_log_probs(logits, batch);
  return torch::stack({pairs.chosen, pairs.rejected}, 1);
}

}  // namespace ampt::train
