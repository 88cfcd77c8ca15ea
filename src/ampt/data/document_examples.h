// One language-model example per document, as the Hugging Face Trainer feeds unpacked text: the
// document (and the separator that ends it) truncated to length + 1 tokens; inputs its first
// `length` tokens, targets the same shifted by one, both padded to `length`, padded targets
// kIgnoredTarget so that the loss does not score them. Packed, several examples share a window
// instead, each with its own positions (Batch::positions), so that none attends to another.
#pragma once

#include "ampt/data/dataset.h"
#include "ampt/data/token_windows.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ampt::data {

// The target of a padded position: torch's cross_entropy ignore_index (and ampt's fused loss's).
inline constexpr int64_t kIgnoredTarget = -100;

struct Document {
  std::size_t span = 0;  // which of the spans holds it
  int64_t begin = 0;     // offset of its first token in that span
  int64_t length = 0;    // tokens, without a separator
};

// The documents of a shard written by write_text_shard (text_shard.h), spans[span]: the runs
// after each `separator` up to the next.
std::vector<Document> split_at(const TokenSpan& shard, std::size_t span, int32_t separator);

struct ExampleCounts {
  int64_t documents = 0;
  int64_t dropped = 0;    // fewer than two tokens, or no scored target: nothing to predict
  int64_t truncated = 0;  // longer than length + 1 tokens
  int64_t examples = 0;   // kept
  int64_t windows = 0;    // the windows they fill: examples unpacked, fewer packed
  int64_t positions = 0;  // the input positions the examples fill, padding excluded
};

class DocumentExamples : public Dataset {
 public:
  // With a `separator` (<|endoftext|>) every example ends with it, as every document does in a
  // packed stream: the model learns where a document stops. Inputs are padded with `pad`.
  // With `masks` (a loss mask per span, loss_mask.h) only the targets whose mask byte has the
  // scored bit count, as instruction data scores its answers; without, every target but padding.
  // Documents of fewer than two tokens, or with no scored target within length + 1 tokens, are
  // dropped; throws RuntimeError naming the data when none is left, or a span holds an id >=
  // vocab_size.
  // `packed`: the examples fill windows greedily in order, none split across two, each window
  // padded only in the tail no further example fits; a sample is then a window (with positions
  // restarting at 0 for each example and for the tail).
  DocumentExamples(std::vector<TokenSpan> spans, const std::vector<Document>& documents,
                   int64_t length, std::optional<int32_t> separator, int64_t pad,
                   int64_t vocab_size, std::vector<TokenSpan> masks = {}, bool packed = false);

  int64_t size() const override { return counts_.windows; }
  Batch gather(const std::vector<int64_t>& indices) const override;
  const ExampleCounts& counts() const { return counts_; }
  // "packed 5000 examples into 412 windows of 2048: 93% scored or prompt tokens, 7% padding
  // (unpacked: 86% padding)"; unpacked: "one example per window".
  std::string packing_summary() const;
  // The examples window `index` holds: [first, first + count) in document order.
  std::pair<int64_t, int64_t> window_examples(int64_t index) const;
  // Examples `examples` (indices below counts().examples, in order) packed as these are: a
  // held-out split by example, the same whether or not they are packed.
  std::shared_ptr<DocumentExamples> select(const std::vector<int64_t>& examples) const;

 private:
  struct Example {
    std::size_t span = 0;
    int64_t begin = 0;
    int64_t tokens = 0;            // at most length + 1
    bool separator_last = false;   // the last token is the separator, after the document's
  };

  // Fills the windows with examples_ (one each unpacked) and counts them.
  void pack(bool packed);
  bool any_scored(const Example& example) const;
  // The example's inputs and targets (scored where its mask says) from in[0] and out[0].
  void write_example(const Example& example, int64_t* in, int64_t* out) const;

  std::vector<TokenSpan> spans_;
  std::vector<TokenSpan> masks_;  // empty: every target scored
  std::vector<Example> examples_;
  std::vector<int64_t> first_example_;  // packed: each window's first example, then the total
  int64_t length_;
  std::optional<int32_t> separator_;
  int64_t pad_;
  bool packed_ = false;
  ExampleCounts counts_;
};

}  // namespace ampt::data
