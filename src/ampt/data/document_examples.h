// One language-model example per document, as the Hugging Face Trainer feeds unpacked text: the
// document (and the separator that ends it) truncated to length + 1 tokens; inputs its first
// `length` tokens, targets the same shifted by one, both padded to `length`, padded targets
// kIgnoredTarget so that the loss does not score them.
#pragma once

#include "ampt/data/dataset.h"
#include "ampt/data/token_windows.h"

#include <cstdint>
#include <optional>
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
  DocumentExamples(std::vector<TokenSpan> spans, const std::vector<Document>& documents,
                   int64_t length, std::optional<int32_t> separator, int64_t pad,
                   int64_t vocab_size, std::vector<TokenSpan> masks = {});

  int64_t size() const override { return static_cast<int64_t>(examples_.size()); }
  Batch gather(const std::vector<int64_t>& indices) const override;
  const ExampleCounts& counts() const { return counts_; }

 private:
  struct Example {
    std::size_t span = 0;
    int64_t begin = 0;
    int64_t tokens = 0;            // at most length + 1
    bool separator_last = false;   // the last token is the separator, after the document's
  };

  bool any_scored(const Example& example) const;

  std::vector<TokenSpan> spans_;
  std::vector<TokenSpan> masks_;  // empty: every target scored
  std::vector<Example> examples_;
  int64_t length_;
  std::optional<int32_t> separator_;
  int64_t pad_;
  ExampleCounts counts_;
};

}  // namespace ampt::data
