#include "ampt/data/token_windows.h"

#include "ampt/core/errors.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <algorithm>

namespace ampt::data {
namespace {

template <class T>
int64_t max_of(const T* tokens, int64_t count) {
  // Blocks of a fixed length let GCC vectorise the reduction at -O2 (its cheap cost model only
  // vectorises loops that need no remainder handling); chunks run on torch's intra-op threads.
  constexpr int64_t kBlock = 4096;
  return at::parallel_reduce(
      0, count, 1 << 22, int64_t{0},
      [tokens](int64_t begin, int64_t end, int64_t running) {
        T largest = 0;
        int64_t i = begin;
        for (; i + kBlock <= end; i += kBlock) {
          for (int64_t j = 0; j < kBlock; ++j) largest = std::max(largest, tokens[i + j]);
        }
        for (; i < end; ++i) largest = std::max(largest, tokens[i]);
        return std::max(running, static_cast<int64_t>(largest));
      },
      [](int64_t a, int64_t b) { return std::max(a, b); });
}

template <class T>
void copy_window(const T* tokens, int64_t block_size, int64_t* inputs, int64_t* targets) {
  for (int64_t t = 0; t < block_size; ++t) {
    inputs[t] = tokens[t];
    targets[t] = tokens[t + 1];
  }
}

}  // namespace

int64_t max_token(const TokenSpan& span) {
  return with_tokens(span, [&](const auto* tokens) { return max_of(tokens, span.count); });
}

TokenWindows::TokenWindows(std::vector<TokenSpan> spans, int64_t block_size, int64_t vocab_size,
                           std::optional<int32_t> document_separator)
    : spans_(std::move(spans)), block_size_(block_size), document_separator_(document_separator) {
  first_window_.push_back(0);
  for (const TokenSpan& span : spans_) {
    if (const int64_t largest = max_token(span); largest >= vocab_size) {
      throw RuntimeError(fmt::format(
          "{}: token id {} >= vocab_size {}; set --vocab_size to at least {}", span.name, largest,
          vocab_size, largest + 1));
    }
    first_window_.push_back(first_window_.back() + std::max<int64_t>(0, span.count - 1) / block_size);
  }
  if (size() == 0) {
    const std::string what = spans_.size() == 1
                                 ? spans_.front().name
                                 : fmt::format("{} and {} more files", spans_.front().name,
                                               spans_.size() - 1);
    throw RuntimeError(fmt::format(
        "{}: no file holds one window of block_size + 1 = {} tokens ({} tokens in all); lower "
        "block_size or add data",
        what, block_size + 1, tokens()));
  }
}

int64_t TokenWindows::tokens() const {
  int64_t total = 0;
  for (const TokenSpan& span : spans_) total += span.count;
  return total;
}

Batch TokenWindows::gather(const std::vector<int64_t>& indices) const {
  const auto n = static_cast<int64_t>(indices.size());
  auto inputs = torch::empty({n, block_size_}, torch::kInt64);
  auto targets = torch::empty({n, block_size_}, torch::kInt64);
  int64_t* in = inputs.data_ptr<int64_t>();
  int64_t* out = targets.data_ptr<int64_t>();
  for (int64_t row = 0; row < n; ++row) {
    const int64_t index = indices[static_cast<size_t>(row)];
    if (index < 0 || index >= size()) {
      throw RuntimeError(fmt::format("window {} out of range: the dataset has {}", index, size()));
    }
    // The span holding window `index`: the last whose first window is <= index.
    const auto s = static_cast<size_t>(
        std::upper_bound(first_window_.begin(), first_window_.end(), index) -
        first_window_.begin() - 1);
    const TokenSpan& span = spans_[s];
    const int64_t start = (index - first_window_[s]) * block_size_;
    with_tokens(span, [&](const auto* tokens) { copy_window(tokens, block_size_, in, out); }, start);
    in += block_size_;
    out += block_size_;
  }
  if (!document_separator_) return {inputs, targets};
  // A document starts after each separator: the separator is the last input of the one before,
  // whose target is the next document's first token.
  auto positions = torch::empty_like(inputs);
  const int64_t* token = inputs.data_ptr<int64_t>();
  int64_t* at = positions.data_ptr<int64_t>();
  for (int64_t i = 0; i < inputs.numel(); ++i) {
    const bool starts = i % block_size_ == 0 || token[i - 1] == *document_separator_;
    at[i] = starts ? 0 : at[i - 1] + 1;
  }
  return {inputs, targets, positions, sequence_starts(positions)};
}

}  // namespace ampt::data
