#include "ampt/data/text_shard.h"

#include "ampt/core/errors.h"
#include "ampt/data/token_file_writer.h"

#include <fmt/format.h>

#include <algorithm>

namespace ampt::data {

void check_fits_shard(const text::Tokenizer& tokenizer) {
  constexpr int64_t kMaxIds = 65536;  // uint16
  if (tokenizer.vocab_size() > kMaxIds) {
    throw RuntimeError(fmt::format(
        "{}: {} tokens do not fit the uint16 ids of an llm.c token shard (at most {})",
        tokenizer.source(), tokenizer.vocab_size(), kMaxIds));
  }
}

text::TokenizeFilesStats write_text_shard(const text::Tokenizer& tokenizer,
                                          const std::vector<std::string>& inputs,
                                          text::TokenizeFilesOptions options,
                                          const std::string& out) {
  check_fits_shard(tokenizer);
  options.specials = text::SpecialTokens::as_text;
  TokenFileWriter writer(out);
  const auto stats = text::tokenize_files(tokenizer, inputs, options,
                                          [&](std::span<const int32_t> ids) { writer.append(ids); });
  writer.commit();
  return stats;
}

int64_t count_token(const TokenSpan& span, int32_t id) {
  if (span.bytes_per_token == 1) {
    const auto* tokens = static_cast<const uint8_t*>(span.data);
    return std::count(tokens, tokens + span.count, id);
  }
  const auto* tokens = static_cast<const uint16_t*>(span.data);
  return std::count(tokens, tokens + span.count, id);
}

}  // namespace ampt::data
