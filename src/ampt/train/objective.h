// What a run minimises, asked by the step, evaluation and the log: an objective takes a batch and
// returns the loss to backpropagate, the mean over the batch's units (scored targets, or
// preference pairs), and the figures it reports (TRL's names). The step weights each
// micro-batch's loss by its units over the step's, so that the update is the same however the
// step's units are split into micro-batches and ranks. Token cross-entropy is today's
// pretraining and SFT; the preference losses (DPO, IPO, SimPO, ORPO) compare the log-probability
// of a chosen answer with a rejected one, against a reference model or without one.
#pragma once

#include "ampt/config/config.h"
#include "ampt/data/batch.h"

#include <torch/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ampt::train {

struct ObjectiveLoss {
  torch::Tensor loss;     // 0-dim float32: the mean over the batch's units
  torch::Tensor figures;  // [figure_names().size()] float32, detached: sums over the units
};

class Objective {
 public:
  virtual ~Objective() = default;
  // How many units `batch` holds: a 0-dim int64 tensor on its device, counted without a sync.
  virtual torch::Tensor units(const data::Batch& batch) const = 0;
  virtual ObjectiveLoss loss(const data::Batch& batch) = 0;
  // The names of ObjectiveLoss::figures, in order; empty: the objective reports none.
  virtual const std::vector<std::string>& figure_names() const = 0;
  // Every batch holds as many units (every target scored): each micro-batch then weighs one
  // over their number, with nothing to count.
  virtual bool uniform_units() const { return false; }
  // The startup line: the loss and its settings, and the reference model.
  virtual std::string describe() const = 0;
};

// Mean token cross-entropy over the scored targets, as `loss` computes it (the model's fused
// head or its logits), with the model's auxiliary losses where it has them (a sparse model's
// load balancing): `loss` then gives their figures, named `figure_names`, into its
// out-parameter.
using TokenLoss = std::function<torch::Tensor(const data::Batch&, torch::Tensor* figures)>;
std::unique_ptr<Objective> token_cross_entropy(TokenLoss loss, bool every_target_scored,
                                               std::vector<std::string> figure_names = {});

// Forwards of a preference run's batches ([2n, T] rows: n chosen, then their n rejected).
struct PreferenceModels {
  // The trained model's logits [rows, T, vocab], with gradients.
  std::function<torch::Tensor(const data::Batch&)> policy;
  // The reference model's, without gradients; null for the reference-free losses (simpo, orpo)
  // and where `reference_table` holds them.
  std::function<torch::Tensor(const data::Batch&)> reference;
  // --precompute_ref_logps: [pairs, 2] float32, each pair's (chosen, rejected) reference
  // log-probability by Batch::pair_ids.
  torch::Tensor reference_table;
  std::string reference_description;  // "the base with the LoRA adapters off", ...
};

// config.objective's preference loss over pairs, as TRL 1.16 computes it: each sequence's
// log-probability is the sum of its answer tokens' (token_log_probs, float32); dpo is DPO's
// sigmoid loss (cDPO with label_smoothing), ipo the squared loss of length-normalised
// log-ratios, simpo CPO's length-normalised sigmoid loss with margin simpo_gamma and no
// reference, orpo the chosen answer's NLL minus orpo_lambda times the log-sigmoid of the log
// odds ratio; dpo and ipo add rpo_alpha times the chosen answer's NLL per token (RPO).
// Figures: rewards/chosen, rewards/rejected, rewards/accuracies, rewards/margins, logps/chosen,
// logps/rejected (orpo adds nll_loss, log_odds_ratio and log_odds_chosen; RPO adds nll_loss).
std::unique_ptr<Objective> preference_objective(const config::Config& config,
                                                PreferenceModels models);

// [pairs, 2] float32: each pair of `batch` its chosen and rejected sequence's log-probability
// under `logits`, as the preference losses sum them.
torch::Tensor pair_log_probs(const torch::Tensor& logits, const data::Batch& batch);

}  // namespace ampt::train
