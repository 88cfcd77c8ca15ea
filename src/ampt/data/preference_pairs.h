// Preference records as training samples: each pair is the prompt with its chosen answer and the
// same prompt with its rejected one (text/tokenize_chats.h writes them, the rejected example's
// tokens marked in the loss mask), each row's targets scored only on its answer. Padded, a sample
// is a pair and a batch of n is 2n rows: the n chosen sequences first and then their rejected
// ones in the same order, as TRL's DPO collator concatenates them. Packed, a sample is a window
// holding whole pairs, chosen then rejected, each sequence its own example (Batch::positions),
// and the batch names each pair's two sequences (Batch::pair_runs): padding-free DPO.
#pragma once

#include "ampt/config/config.h"
#include "ampt/data/data_splits.h"
#include "ampt/data/dataset.h"
#include "ampt/data/document_examples.h"
#include "ampt/data/token_windows.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ampt::data {

// Whether `mask` is the mask of preference records: its second example is marked rejected.
bool holds_pairs(const TokenSpan& mask);

struct PairCounts {
  int64_t pairs = 0;      // records kept (Batch::pair_ids count them from 0)
  int64_t dropped = 0;    // an answer with nothing scored within the tokens a sequence may have
  int64_t truncated = 0;  // a pair cut to fit (each sequence keeps its start)
  int64_t windows = 0;    // the windows the pairs fill: the pairs unpacked, fewer packed
};

class PreferencePairs : public Dataset {
 public:
  // Shards of tokens and their loss masks (loss_mask.h), as tokenize_chats wrote a preference
  // file's: every chosen example followed by its rejected one. A sequence keeps at most
  // length + 1 tokens, and packed, a pair whose two sequences do not fit one window together
  // keeps length / 2 + 1 of each (TRL's truncation_mode keep_start); rows are padded with `pad`.
  // Throws RuntimeError naming the data when a mask does not hold pairs, none is left, or an id
  // is >= vocab_size.
  PreferencePairs(std::vector<TokenSpan> tokens, std::vector<TokenSpan> masks, int64_t length,
                  int64_t pad, int64_t vocab_size, bool packed);

  int64_t size() const override { return counts_.windows; }
  // Padded: [2n, length] rows for n pairs, chosen rows then rejected rows. Packed: [n, length]
  // windows with positions, their runs (starts) and each pair's two runs (pair_runs). Both name
  // their pairs (pair_ids).
  Batch gather(const std::vector<int64_t>& indices) const override;
  const PairCounts& counts() const { return counts_; }
  // The pairs at `indices` (below counts().pairs), packed as these are: a held-out split by
  // pair, the same whether or not they are packed.
  std::shared_ptr<PreferencePairs> select(const std::vector<int64_t>& indices) const;
  // A hash of the pairs as the batches give them: each pair's id, its two sequences' tokens and
  // loss masks, the length and whether they are packed. What --precompute_ref_logps's table is of
  // (train/reference_cache.h).
  uint64_t digest() const;
  // "packed 500 pairs into 120 windows of 1024: 91% sequence tokens, 9% padding (unpacked: 64%
  // padding)"; unpacked: "each sequence padded to its own row".
  std::string packing_summary() const;

 private:
  struct Pair {
    int64_t id = 0;  // its index among the data's pairs (Batch::pair_ids)
    Document chosen;
    Document rejected;
    int64_t positions() const { return chosen.length - 1 + rejected.length - 1; }
  };
  // Fills the windows with pairs_ (one each unpacked) and counts them.
  void pack();
  bool any_scored(const Document& sequence) const;
  // The ids of the (padded) pairs at `indices`.
  torch::Tensor pair_ids(const std::vector<int64_t>& indices) const;
  void write_row(const Document& sequence, int64_t* in, int64_t* out) const;

  std::vector<TokenSpan> tokens_;
  std::vector<TokenSpan> masks_;
  int64_t length_;
  int64_t pad_;
  bool packed_;
  std::vector<Pair> pairs_;
  std::vector<int64_t> first_pair_;  // packed: each window's first pair, then the total
  PairCounts counts_;
};

// UsageError unless config.objective fits the data: a preference objective for preference
// pairs, token cross-entropy for anything else (`held`: what the data holds instead, "documents").
void require_objective_for(const config::Config& config, bool pairs, std::string_view held);

// The splits of preference pairs: `val` where the data has a validation part, else
// config.val_fraction of `all`'s pairs held out, before packing; a preference spec of
// `length`-token rows; the description's counts. Throws UsageError for --train_on_prompt.
DataSplits pair_splits(std::shared_ptr<const PreferencePairs> all,
                       std::shared_ptr<const PreferencePairs> val, int64_t length,
                       int64_t vocab_size, const config::Config& config);

}  // namespace ampt::data
