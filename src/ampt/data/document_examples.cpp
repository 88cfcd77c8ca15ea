#include "ampt/data/document_examples.h"

#include "ampt/core/errors.h"
#include "ampt/text/tokenize_chats.h"

#include <fmt/format.h>

#include <algorithm>

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
                                   int64_t vocab_size, std::vector<TokenSpan> masks)
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
}

bool DocumentExamples::any_scored(const Example& example) const {
  if (masks_.empty()) return true;
  const auto* bits = static_cast<const uint8_t*>(masks_[example.span].data) + example.begin;
  // Token 0 is never a target.
  return std::any_of(bits + 1, bits + example.tokens,
                     [](uint8_t bit) { return (bit & text::kScoredToken) != 0; });
}

Batch DocumentExamples::gather(const std::vector<int64_t>& indices) const {
  const auto n = static_cast<int64_t>(indices.size());
  auto inputs = torch::full({n, length_}, pad_, torch::kInt64);
  auto targets = torch::full({n, length_}, kIgnoredTarget, torch::kInt64);
  for (int64_t row = 0; row < n; ++row) {
    const int64_t index = indices[static_cast<size_t>(row)];
    if (index < 0 || index >= size()) {
      throw RuntimeError(fmt::format("example {} out of range: the dataset has {}", index, size()));
    }
    const Example& e = examples_[static_cast<size_t>(index)];
    const TokenSpan& span = spans_[e.span];
    const int64_t from_span = e.tokens - (e.separator_last ? 1 : 0);
    const auto separator = e.separator_last ? separator_ : std::nullopt;
    int64_t* in = inputs.data_ptr<int64_t>() + row * length_;
    int64_t* out = targets.data_ptr<int64_t>() + row * length_;
    with_tokens(span, [&](const auto* tokens) { copy_example(tokens, from_span, separator, in, out); },
                e.begin);
    if (!masks_.empty()) {
      const auto* bits = static_cast<const uint8_t*>(masks_[e.span].data) + e.begin;
      for (int64_t t = 0; t + 1 < e.tokens; ++t) {
        if ((bits[t + 1] & text::kScoredToken) == 0) out[t] = kIgnoredTarget;
      }
    }
  }
  return {inputs, targets};
}

}  // namespace ampt::data
