#include "ampt/data/document_examples.h"

#include "ampt/core/errors.h"
#include "ampt/text/tokenize_chats.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace ampt::data {
namespace {

template <class T>
std::vector<Document> split_tokens(const T* tokens, int64_t count, std::size_t span,
                                   int32_t separator) {
  std::vector<Document> documents;
  int64_t start = -1;  // the current document's first token; -1 before the first separator
  for (int64_t i = 0; i < count; ++i) {
    if (static_cast<int64_t>(tokens[i]) != separator) continue;
    if (start >= 0) documents.push_back({span, start, i - start});
    start = i + 1;
  }
  if (start >= 0) documents.push_back({span, start, count - start});
  return documents;
}

template <class T>
void copy_example(const T* tokens, int64_t from_span, std::optional<int32_t> separator,
                  int64_t* inputs, int64_t* targets) {
  // Token t of the example: the span's, then the separator.
  const auto at = [&](int64_t t) -> int64_t {
    return t < from_span ? static_cast<int64_t>(tokens[t]) : *separator;
  };
  const int64_t n = from_span + (separator ? 1 : 0);
  for (int64_t t = 0; t + 1 < n; ++t) {
    inputs[t] = at(t);
    targets[t] = at(t + 1);
  }
}

}  // namespace

std::vector<Document> split_at(const TokenSpan& shard, std::size_t span, int32_t separator) {
  return with_tokens(shard, [&](const auto* tokens) {
    return split_tokens(tokens, shard.count, span, separator);
  });
}

DocumentExamples::DocumentExamples(std::vector<TokenSpan> spans,
                                   const std::vector<Document>& documents, int64_t length,
                                   std::optional<int32_t> separator, int64_t pad,
                                   int64_t vocab_size, std::vector<TokenSpan> masks, bool packed)
    : spans_(std::move(spans)), masks_(std::move(masks)), length_(length), separator_(separator),
      pad_(pad) {
  for (const TokenSpan& span : spans_) {
    if (const int64_t largest = max_token(span); largest >= vocab_size) {
      throw RuntimeError(fmt::format(
          "{}: token id {} >= vocab_size {}; set --vocab_size to at least {}", span.name, largest,
          vocab_size, largest + 1));
    }
  }
  counts_.documents = static_cast<int64_t>(documents.size());
  for (const Document& document : documents) {
    const int64_t whole = document.length + (separator ? 1 : 0);
    if (whole < 2) {
      ++counts_.dropped;
      continue;
    }
    const int64_t tokens = std::min(whole, length + 1);
    const Example example{document.span, document.begin, tokens, separator && tokens == whole};
    if (!any_scored(example)) {
      ++counts_.dropped;
      continue;
    }
    if (whole > length + 1) ++counts_.truncated;
    examples_.push_back(example);
  }
  if (examples_.empty()) {
    const std::string what =
        masks_.empty() ? fmt::format("none of its {} documents has two tokens or more", counts_.documents)
                       : fmt::format("none of its {} examples has a scored token within its first {}: "
                                     "raise --max_length",
                                     counts_.documents, length + 1);
    throw RuntimeError(fmt::format(
        "{}{}: {}: nothing to learn from", spans_.front().name,
        spans_.size() > 1 ? fmt::format(" and {} more files", spans_.size() - 1) : "", what));
  }
  pack(packed);
}

void DocumentExamples::pack(bool packed) {
  packed_ = packed;
  counts_.examples = static_cast<int64_t>(examples_.size());
  counts_.positions = 0;
  first_example_.clear();
  int64_t fill = length_;  // of the window being filled: full before the first
  for (size_t e = 0; e < examples_.size(); ++e) {
    const int64_t positions = examples_[e].tokens - 1;
    counts_.positions += positions;
    if (!packed || fill + positions > length_) {
      first_example_.push_back(static_cast<int64_t>(e));
      fill = 0;
    }
    fill += positions;
  }
  counts_.windows = static_cast<int64_t>(first_example_.size());
  first_example_.push_back(counts_.examples);
}

std::shared_ptr<DocumentExamples> DocumentExamples::select(
    const std::vector<int64_t>& examples) const {
  auto chosen = std::make_shared<DocumentExamples>(*this);
  chosen->examples_.clear();
  for (const int64_t e : examples) chosen->examples_.push_back(examples_.at(static_cast<size_t>(e)));
  chosen->pack(packed_);
  return chosen;
}

std::string DocumentExamples::packing_summary() const {
  if (!packed_) return "one example per window";
  const auto padding = [&](int64_t windows) {
    return 100.0 * (1.0 - static_cast<double>(counts_.positions) /
                              static_cast<double>(windows * length_));
  };
  return fmt::format("packed {} examples into {} windows of {}: {:.0f}% scored or prompt tokens, "
                     "{:.0f}% padding (unpacked: {:.0f}% padding)",
                     counts_.examples, counts_.windows, length_, 100.0 - padding(counts_.windows),
                     padding(counts_.windows), padding(counts_.examples));
}

std::pair<int64_t, int64_t> DocumentExamples::window_examples(int64_t index) const {
  if (index < 0 || index >= size()) {
    throw RuntimeError(fmt::format("{} {} out of range: the dataset has {}",
                                   packed_ ? "window" : "example", index, size()));
  }
  const auto i = static_cast<size_t>(index);
  return {first_example_[i], first_example_[i + 1] - first_example_[i]};
}

bool DocumentExamples::any_scored(const Example& example) const {
  if (masks_.empty()) return true;
  const auto* bits = static_cast<const uint8_t*>(masks_[example.span].data) + example.begin;
  // Token 0 is never a target.
  return std::any_of(bits + 1, bits + example.tokens,
                     [](uint8_t bit) { return (bit & text::kScoredToken) != 0; });
}

void DocumentExamples::write_example(const Example& e, int64_t* in, int64_t* out) const {
  const int64_t from_span = e.tokens - (e.separator_last ? 1 : 0);
  const auto separator = e.separator_last ? separator_ : std::nullopt;
  with_tokens(spans_[e.span],
              [&](const auto* tokens) { copy_example(tokens, from_span, separator, in, out); },
              e.begin);
  if (masks_.empty()) return;
  const auto* bits = static_cast<const uint8_t*>(masks_[e.span].data) + e.begin;
  for (int64_t t = 0; t + 1 < e.tokens; ++t) {
    if ((bits[t + 1] & text::kScoredToken) == 0) out[t] = kIgnoredTarget;
  }
}

Batch DocumentExamples::gather(const std::vector<int64_t>& indices) const {
  const auto n = static_cast<int64_t>(indices.size());
  auto inputs = torch::full({n, length_}, pad_, torch::kInt64);
  auto targets = torch::full({n, length_}, kIgnoredTarget, torch::kInt64);
  auto positions = packed_ ? torch::empty({n, length_}, torch::kInt64) : torch::Tensor();
  for (int64_t row = 0; row < n; ++row) {
    const auto [first, count] = window_examples(indices[static_cast<size_t>(row)]);
    int64_t* in = inputs.data_ptr<int64_t>() + row * length_;
    int64_t* out = targets.data_ptr<int64_t>() + row * length_;
    int64_t* at = packed_ ? positions.data_ptr<int64_t>() + row * length_ : nullptr;
    int64_t offset = 0;
    for (int64_t e = first; e < first + count; ++e) {
      const Example& example = examples_[static_cast<size_t>(e)];
      write_example(example, in + offset, out + offset);
      if (at != nullptr) std::iota(at + offset, at + offset + example.tokens - 1, int64_t{0});
      offset += example.tokens - 1;
    }
    // The tail counts from 0 too: a run of its own, which no example attends to.
    if (at != nullptr) std::iota(at + offset, at + length_, int64_t{0});
  }
  if (!packed_) return {inputs, targets};
  return {inputs, targets, positions, sequence_starts(positions)};
}

}  // namespace ampt::data
