#include "ampt/train/rollout.h"

#include "ampt/core/errors.h"
#include "ampt/data/document_examples.h"
#include "ampt/text/utf8.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace ampt::train {

Rollout::Rollout(RolloutSettings settings, const data::PromptDataset& prompts,
                 const text::Tokenizer& tokenizer, reward::Rewards* rewards, models::Decoding decoding)
    : settings_(std::move(settings)),
      prompts_(prompts),
      tokenizer_(tokenizer),
      rewards_(rewards),
      decoding_(std::move(decoding)) {
  if (rewards_) {
    figure_names_ = {"reward", "reward_std", "frac_reward_zero_std"};
    for (const auto& term : rewards_->terms()) figure_names_.push_back("rewards/" + term.name + "/mean");
  }
  figure_names_.push_back("completions/mean_length");
  figure_names_.push_back("completions/clipped_ratio");
}

RolloutBatches Rollout::make(const data::Batch& prompt_batch, int64_t generation) {
  const auto indices = prompt_batch.inputs.to(torch::kCPU);
  const int64_t prompts = indices.size(0), groups = settings_.generations;
  std::vector<models::SampleRow> rows;
  for (int64_t p = 0; p < prompts; ++p) {
    const int64_t index = indices[p].item<int64_t>();
    const auto& ids = prompts_.record(index).ids;
    for (int64_t g = 0; g < groups; ++g) rows.push_back({std::vector<int64_t>(ids.begin(), ids.end()), index, g});
  }
  auto sampling = settings_.sampling;
  sampling.step = generation;
  const auto completions = models::sample(decoding_, rows, sampling);

  // Rewards, group by group; each term's values kept for its figure.
  const auto terms = rewards_ ? rewards_->terms().size() : 0;
  std::vector<double> totals(rows.size(), 0.0);
  std::vector<double> term_sums(terms, 0.0);
  std::vector<std::string> texts(rows.size());
  double length_sum = 0, truncated = 0;
  for (int64_t p = 0; p < prompts; ++p) {
    std::vector<std::string> group_texts;
    std::vector<int64_t> lengths;
    for (int64_t g = 0; g < groups; ++g) {
      const auto& c = completions[p * groups + g];
      auto tokens = c.tokens;
      const bool stopped = !c.truncated && !tokens.empty();
      if (stopped) tokens.pop_back();  // the stop token is no text of the answer
      // As TRL's batch_decode: a completion cut inside a character (byte tokens, byte-level BPE)
      // is read with U+FFFD, so that the rewards and completions.jsonl get well-formed UTF-8.
      texts[p * groups + g] =
          text::replace_invalid_utf8(tokenizer_.decode(std::vector<int32_t>(tokens.begin(), tokens.end())));
      group_texts.push_back(texts[p * groups + g]);
      lengths.push_back(static_cast<int64_t>(c.tokens.size()));
      length_sum += static_cast<double>(c.tokens.size());
      truncated += c.truncated ? 1 : 0;
    }
    if (!rewards_) continue;
    const int64_t index = rows[p * groups].prompt_index;
    const auto& record = prompts_.record(index);
    const auto scored = rewards_->score({record.record, record.place, group_texts, lengths});
    for (int64_t g = 0; g < groups; ++g) totals[p * groups + g] = scored.total[g];
    for (std::size_t t = 0; t < terms; ++t) {
      for (const double v : scored.by_term[t]) term_sums[t] += v;
    }
  }
  RolloutBatches out;
  const double n = static_cast<double>(rows.size());
  std::vector<float> figures;
  auto flat_advantages = torch::zeros({static_cast<int64_t>(rows.size())}, torch::kFloat32);
  if (rewards_) {
    const auto rewards = torch::tensor(totals, torch::kFloat64).to(torch::kFloat32).view({prompts, groups});
    const auto scaled = grpo::group_advantages(rewards, settings_.scaling);
    flat_advantages = scaled.advantages.reshape({-1}).to(torch::kCPU);
    figures.push_back(rewards.mean().item<float>());
    const auto group_std = groups > 1 ? rewards.std(1, /*unbiased=*/true) : torch::zeros({prompts});
    figures.push_back(settings_.scaling == grpo::RewardScaling::batch && rewards.numel() > 1
                          ? rewards.std().item<float>()
                          : group_std.mean().item<float>());
    figures.push_back(scaled.frac_reward_zero_std.item<float>());
    for (const double sum : term_sums) figures.push_back(static_cast<float>(sum / n));
  }
  figures.push_back(static_cast<float>(length_sum / n));
  figures.push_back(static_cast<float>(truncated / n));
  out.figures = torch::tensor(figures, torch::kFloat32).to(settings_.device);

  for (int64_t p = 0; p < prompts; ++p) {
    const int64_t r = p * groups;
    const int64_t index = rows[r].prompt_index;
    out.shown.push_back({index, prompts_.record(index).text, texts[r], totals[r],
                         flat_advantages[r].item<double>(), completions[r].truncated});
  }

  // The rows, batch_size at a time: prompt then completion, targets on the completion only.
  const auto total_rows = static_cast<int64_t>(rows.size());
  for (int64_t first = 0; first < total_rows; first += settings_.rows_per_micro_batch) {
    const int64_t count = std::min(settings_.rows_per_micro_batch, total_rows - first);
    int64_t width = 1;
    for (int64_t r = first; r < first + count; ++r) {
      width = std::max(width, static_cast<int64_t>(rows[r].prompt.size() + completions[r].tokens.size()) - 1);
    }
    auto inputs = torch::zeros({count, width}, torch::kInt64);
    auto targets = torch::full({count, width}, data::kIgnoredTarget, torch::kInt64);
    auto mask = torch::zeros({count, width}, torch::kFloat32);
    auto sampler = torch::zeros({count, width}, torch::kFloat32);
    auto in = inputs.accessor<int64_t, 2>();
    auto out_targets = targets.accessor<int64_t, 2>();
    auto m = mask.accessor<float, 2>();
    auto s = sampler.accessor<float, 2>();
    std::vector<int64_t> scored;  // the completion's positions, flat: the logits the loss reads
    for (int64_t i = 0; i < count; ++i) {
      const auto& prompt = rows[first + i].prompt;
      const auto& c = completions[first + i];
      std::vector<int64_t> sequence = prompt;
      sequence.insert(sequence.end(), c.tokens.begin(), c.tokens.end());
      for (std::size_t t = 0; t + 1 < sequence.size(); ++t) in[i][t] = sequence[t];
      const float counted = settings_.mask_truncated && c.truncated ? 0.0f : 1.0f;
      for (std::size_t j = 0; j < c.tokens.size(); ++j) {
        const auto t = static_cast<int64_t>(prompt.size() + j) - 1;
        out_targets[i][t] = c.tokens[j];
        scored.push_back(i * width + t);
        m[i][t] = counted;
        s[i][t] = c.logprobs[j];
      }
    }
    data::Batch batch;
    batch.inputs = inputs.to(settings_.device);
    batch.targets = targets.to(settings_.device);
    batch.completion_mask = mask.to(settings_.device);
    batch.logit_rows = torch::tensor(scored, torch::kInt64).to(settings_.device);
    batch.sampler_log_probs = sampler.to(settings_.device);
    batch.advantages = flat_advantages.narrow(0, first, count).to(torch::kFloat32).to(settings_.device);
    const auto room = [&] { return torch::zeros({count, width}, torch::dtype(torch::kFloat32).device(settings_.device)); };
    if (settings_.keep_old_log_probs) batch.old_log_probs = room();
    if (settings_.keep_reference) batch.ref_log_probs = room();
    if (settings_.keep_sampler_weights) {
      batch.sampler_weights = room();
      batch.sampler_figures = torch::zeros({static_cast<int64_t>(grpo::sampler_figure_names().size())}, torch::dtype(torch::kFloat32).device(settings_.device));
    }
    batch.mismatch = torch::zeros({3}, torch::dtype(torch::kFloat32).device(settings_.device));
    out.micro_batches.push_back(std::move(batch));
  }
  return out;
}

}  // namespace ampt::train
