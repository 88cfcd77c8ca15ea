#include "ampt/data/preference_pairs.h"

#include "ampt/config/enum_names.h"
#include "ampt/core/errors.h"
#include "ampt/core/fnv1a.h"
#include "ampt/data/loss_mask.h"
#include "ampt/text/tokenize_chats.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace ampt::data {
namespace {

const uint8_t* mask_bytes(const TokenSpan& mask) { return static_cast<const uint8_t*>(mask.data); }

bool rejected(const TokenSpan& mask, const Document& example) {
  return (mask_bytes(mask)[example.begin] & text::kRejectedExample) != 0;
}

}  // namespace

bool holds_pairs(const TokenSpan& mask) {
  // The second example is the first record's rejected answer: no need to read further.
  const uint8_t* bits = mask_bytes(mask);
  const uint8_t* end = bits + mask.count;
  const uint8_t* second = std::find_if(bits + std::min<int64_t>(1, mask.count), end, [](uint8_t b) {
    return (b & text::kExampleStart) != 0;
  });
  return second != end && (*second & text::kRejectedExample) != 0;
}

PreferencePairs::PreferencePairs(std::vector<TokenSpan> tokens, std::vector<TokenSpan> masks,
                                 int64_t length, int64_t pad, int64_t vocab_size, bool packed)
    : tokens_(std::move(tokens)), masks_(std::move(masks)), length_(length), pad_(pad),
      packed_(packed) {
  for (std::size_t s = 0; s < tokens_.size(); ++s) {
    const TokenSpan& span = tokens_[s];
    if (const int64_t largest = max_token(span); largest >= vocab_size) {
      throw RuntimeError(fmt::format("{}: token id {} >= vocab_size {}; set --vocab_size to at least {}",
                                     span.name, largest, vocab_size, largest + 1));
    }
    const auto examples = mask_examples(masks_[s], s);
    for (std::size_t i = 0; i < examples.size(); i += 2) {
      if (i + 1 == examples.size() || rejected(masks_[s], examples[i]) ||
          !rejected(masks_[s], examples[i + 1])) {
        throw RuntimeError(fmt::format(
            "{}: example {} is not a chosen answer followed by its rejected one: the mask was not "
            "written from preference records",
            masks_[s].name, i));
      }
      Pair pair{static_cast<int64_t>(pairs_.size()), examples[i], examples[i + 1]};
      const auto whole = pair;
      for (Document* sequence : {&pair.chosen, &pair.rejected}) {
        sequence->length = std::min(sequence->length, length + 1);
      }
      // A window takes a pair whole: one that does not fit shares the window evenly.
      if (packed && pair.positions() > length) {
        for (Document* sequence : {&pair.chosen, &pair.rejected}) {
          sequence->length = std::min(sequence->length, length / 2 + 1);
        }
      }
      const bool cut = pair.chosen.length < whole.chosen.length ||
                       pair.rejected.length < whole.rejected.length;
      if (!any_scored(pair.chosen) || !any_scored(pair.rejected)) {
        ++counts_.dropped;
        continue;
      }
      if (cut) ++counts_.truncated;
      pairs_.push_back(pair);
    }
  }
  if (pairs_.empty()) {
    throw RuntimeError(fmt::format(
        "{}: no preference pair has an answer token within the first {} tokens of both its "
        "sequences: raise --max_length or shorten the prompts",
        tokens_.front().name, length + 1));
  }
  pack();
}

void PreferencePairs::pack() {
  counts_.pairs = static_cast<int64_t>(pairs_.size());
  first_pair_.clear();
  int64_t fill = length_;  // of the window being filled: full before the first
  for (std::size_t p = 0; p < pairs_.size(); ++p) {
    if (!packed_ || fill + pairs_[p].positions() > length_) {
      first_pair_.push_back(static_cast<int64_t>(p));
      fill = 0;
    }
    fill += pairs_[p].positions();
  }
  counts_.windows = static_cast<int64_t>(first_pair_.size());
  first_pair_.push_back(counts_.pairs);
}

std::shared_ptr<PreferencePairs> PreferencePairs::select(const std::vector<int64_t>& indices) const {
  auto chosen = std::make_shared<PreferencePairs>(*this);
  chosen->pairs_.clear();
  for (const int64_t p : indices) chosen->pairs_.push_back(pairs_.at(static_cast<std::size_t>(p)));
  chosen->pack();
  return chosen;
}

std::string PreferencePairs::packing_summary() const {
  if (!packed_) return "each sequence padded to its own row";
  int64_t positions = 0;
  for (const Pair& pair : pairs_) positions += pair.positions();
  const auto padding = [&](int64_t rows) {
    return 100.0 * (1.0 - static_cast<double>(positions) / static_cast<double>(rows * length_));
  };
  return fmt::format("packed {} pairs into {} windows of {}, each sequence its own example: {:.0f}% "
                     "sequence tokens, {:.0f}% padding (unpacked: {:.0f}% padding)",
                     counts_.pairs, counts_.windows, length_, 100.0 - padding(counts_.windows),
                     padding(counts_.windows), padding(2 * counts_.pairs));
}

uint64_t PreferencePairs::digest() const {
  Fnv1a hash;
  hash.add_int(length_).add_int(packed_ ? 1 : 0);
  for (const auto& pair : pairs_) {
    hash.add_int(pair.id);
    for (const auto* sequence : {&pair.chosen, &pair.rejected}) {
      const auto& span = tokens_[sequence->span];
      hash.add_int(sequence->length).add_int(span.bytes_per_token);
      hash.add({static_cast<const char*>(span.data) + sequence->begin * span.bytes_per_token,
                static_cast<size_t>(sequence->length * span.bytes_per_token)});
      const auto* mask = mask_bytes(masks_[sequence->span]) + sequence->begin;
      hash.add({reinterpret_cast<const char*>(mask), static_cast<size_t>(sequence->length)});
    }
  }
  return hash.digest();
}

bool PreferencePairs::any_scored(const Document& sequence) const {
  const auto* mask = mask_bytes(masks_[sequence.span]) + sequence.begin;
  // The first token is never a target.
  return std::any_of(mask + 1, mask + sequence.length,
                     [](uint8_t bits) { return (bits & text::kScoredToken) != 0; });
}

void PreferencePairs::write_row(const Document& sequence, int64_t* in, int64_t* out) const {
  const auto* mask = mask_bytes(masks_[sequence.span]) + sequence.begin;
  with_tokens(
      tokens_[sequence.span],
      [&](const auto* ids) {
        for (int64_t t = 0; t + 1 < sequence.length; ++t) {
          in[t] = static_cast<int64_t>(ids[t]);
          out[t] = (mask[t + 1] & text::kScoredToken) != 0 ? static_cast<int64_t>(ids[t + 1])
                                                          : kIgnoredTarget;
        }
      },
      sequence.begin);
}

Batch PreferencePairs::gather(const std::vector<int64_t>& indices) const {
  const auto n = static_cast<int64_t>(indices.size());
  if (!packed_) {
    auto inputs = torch::full({2 * n, length_}, pad_, torch::kInt64);
    auto targets = torch::full({2 * n, length_}, kIgnoredTarget, torch::kInt64);
    int64_t* in = inputs.data_ptr<int64_t>();
    int64_t* out = targets.data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      const Pair& pair = pairs_.at(static_cast<std::size_t>(indices[static_cast<std::size_t>(i)]));
      write_row(pair.chosen, in + i * length_, out + i * length_);
      write_row(pair.rejected, in + (n + i) * length_, out + (n + i) * length_);
    }
    Batch batch{inputs, targets};
    batch.pair_ids = pair_ids(indices);
    return batch;
  }
  auto inputs = torch::full({n, length_}, pad_, torch::kInt64);
  auto targets = torch::full({n, length_}, kIgnoredTarget, torch::kInt64);
  auto positions = torch::empty({n, length_}, torch::kInt64);
  std::vector<int64_t> runs;  // each pair's chosen run, then its rejected run
  std::vector<int64_t> ids;
  int64_t run = 0;            // runs so far, over the windows before this one too
  for (int64_t row = 0; row < n; ++row) {
    const auto window = static_cast<std::size_t>(indices[static_cast<std::size_t>(row)]);
    int64_t* in = inputs.data_ptr<int64_t>() + row * length_;
    int64_t* out = targets.data_ptr<int64_t>() + row * length_;
    int64_t* at = positions.data_ptr<int64_t>() + row * length_;
    int64_t offset = 0;
    for (int64_t p = first_pair_.at(window); p < first_pair_.at(window + 1); ++p) {
      const Pair& pair = pairs_[static_cast<std::size_t>(p)];
      ids.push_back(pair.id);
      for (const Document* sequence : {&pair.chosen, &pair.rejected}) {
        write_row(*sequence, in + offset, out + offset);
        std::iota(at + offset, at + offset + sequence->length - 1, int64_t{0});
        offset += sequence->length - 1;
        runs.push_back(run++);
      }
    }
    // The tail counts from 0 too: a run of its own, which no sequence attends to.
    std::iota(at + offset, at + length_, int64_t{0});
    if (offset < length_) ++run;
  }
  Batch batch{inputs, targets, positions, sequence_starts(positions)};
  batch.pair_runs = torch::tensor(runs, torch::kInt64).view({-1, 2});
  batch.pair_ids = torch::tensor(ids, torch::kInt64);
  return batch;
}

torch::Tensor PreferencePairs::pair_ids(const std::vector<int64_t>& indices) const {
  std::vector<int64_t> ids;
  for (const int64_t i : indices) ids.push_back(pairs_.at(static_cast<std::size_t>(i)).id);
  return torch::tensor(ids, torch::kInt64);
}

void require_objective_for(const config::Config& config, bool pairs, std::string_view held) {
  if (pairs && config.objective == config::Objective::lm) {
    throw UsageError(fmt::format(
        "{} holds preference records (prompt, chosen, rejected): train on them with --objective "
        "dpo, ipo, simpo or orpo",
        config.dataset));
  }
  if (!pairs && config.objective != config::Objective::lm) {
    throw UsageError(fmt::format(
        "--objective {} learns from preference records (\"prompt\", \"chosen\", \"rejected\"), "
        "and {} holds {}",
        config::to_string(config.objective), config.dataset, held));
  }
}

DataSplits pair_splits(std::shared_ptr<const PreferencePairs> all,
                       std::shared_ptr<const PreferencePairs> val, int64_t length,
                       int64_t vocab_size, const config::Config& config) {
  if (config.train_on_prompt) {
    throw UsageError("--train_on_prompt scores the prompts of instruction records; a preference "
                     "objective compares answers only: drop it");
  }
  const PairCounts counts = all->counts();
  DataSpec spec{Task::language_model, {length}, vocab_size};
  spec.every_target_scored = false;
  spec.preference = true;
  DataSplits splits =
      val ? DataSplits{spec, all, val, ""}
          : held_out_items(counts.pairs,
                           [&](const std::vector<int64_t>& pairs) { return all->select(pairs); },
                           spec, config);
  std::string cut;
  if (counts.dropped > 0) {
    cut += fmt::format(", {} dropped (an answer with nothing to score in its tokens)", counts.dropped);
  }
  if (counts.truncated > 0) cut += fmt::format(", {} cut to fit", counts.truncated);
  splits.description = fmt::format(
      "preference pairs, {}{}; {}", all->packing_summary(), cut,
      split_counts(splits, config.packing ? fmt::format("windows of {}", length)
                                          : fmt::format("pairs of up to {} tokens", length)));
  return splits;
}

}  // namespace ampt::data
