#include "ampt/data/text_shard.h"

#include "ampt/data/loss_mask.h"
#include "ampt/data/token_file_writer.h"
#include "ampt/text/tokenize_chats.h"

#include <algorithm>

namespace ampt::data {

text::TokenizeFilesStats write_text_shard(const text::Tokenizer& tokenizer,
                                          const std::vector<std::string>& inputs,
                                          text::TokenizeFilesOptions options,
                                          const std::string& out,
                                          const text::ChatTemplate* chat) {
  options.specials = text::SpecialTokens::as_text;
  TokenFileWriter writer(out, tokenizer.vocab_size());
  if (chat != nullptr) {
    TokenFileWriter mask(loss_mask_path(out), kLossMask);
    const auto stats = text::tokenize_chats(
        tokenizer, *chat, inputs, options,
        [&](std::span<const int32_t> ids, std::span<const uint8_t> bits) {
          writer.append(ids);
          mask.append(bits);
        });
    mask.commit();
    writer.commit();
    return stats;
  }
  const auto stats = text::tokenize_files(tokenizer, inputs, options,
                                          [&](std::span<const int32_t> ids) { writer.append(ids); });
  writer.commit();
  return stats;
}

int64_t count_token(const TokenSpan& span, int32_t id) {
  return with_tokens(span, [&](const auto* tokens) -> int64_t {
    return std::count_if(tokens, tokens + span.count,
                         [id](auto token) { return static_cast<int64_t>(token) == id; });
  });
}

}  // namespace ampt::data
