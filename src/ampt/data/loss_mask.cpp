#include "ampt/data/loss_mask.h"

#include "ampt/core/errors.h"
#include "ampt/data/token_file.h"
#include "ampt/text/tokenize_chats.h"

#include <fmt/format.h>

namespace ampt::data {

std::string loss_mask_path(const std::string& shard) {
  constexpr std::string_view kBin = ".bin";
  const std::string stem = shard.ends_with(kBin) ? shard.substr(0, shard.size() - kBin.size()) : shard;
  return stem + ".mask";
}

TokenSpan open_loss_mask(const std::string& path, const TokenSpan& tokens) {
  TokenSpan mask = open_llmc_file(path, kLossMask);
  if (mask.count != tokens.count) {
    throw RuntimeError(fmt::format("{}: {} mask bytes for the {} tokens of {}", path, mask.count,
                                   tokens.count, tokens.name));
  }
  return mask;
}

std::vector<Document> mask_examples(const TokenSpan& mask, std::size_t span) {
  const auto* bits = static_cast<const uint8_t*>(mask.data);
  std::vector<Document> examples;
  for (int64_t i = 0; i < mask.count; ++i) {
    if ((bits[i] & text::kExampleStart) == 0) continue;
    if (!examples.empty()) examples.back().length = i - examples.back().begin;
    examples.push_back({span, i, mask.count - i});
  }
  if (examples.empty() && mask.count > 0) {
    throw RuntimeError(fmt::format(
        "{}: no byte marks an example start (bit 1, value 2) among its {} bytes: a loss mask "
        "needs them to find its examples; write it again with ampt tokenize",
        mask.name, mask.count));
  }
  return examples;
}

}  // namespace ampt::data
