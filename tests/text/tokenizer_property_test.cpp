// Properties on random text: decode(encode(x)) gives x back (x with ill-formed UTF-8 replaced),
// and parallel encoding gives the serial ids, with and without special tokens.
#include "ampt/text/tokenizer.h"
#include "ampt/text/tokenizer_files.h"
#include "ampt/text/utf8.h"
#include "text/text_fixtures.h"
#include "support/skip.h"

#include <catch2/catch.hpp>

#include <random>

using ampt::text::SpecialTokens;
using ampt::text::Tokenizer;

namespace {

// Random text over fragments that stress the pre-tokenizer and BPE: words, spaces and runs of
// whitespace, digits, several scripts, emoji, ill-formed bytes, <|endoftext|> and parts of it.
std::string random_text(std::mt19937& rng, std::size_t bytes) {
  static const std::vector<std::string> fragments = {
      "the", " the", " and", "ing", " test", "'s", "'ll", "'S", " ", "  ", "    ", "\n", "\n\n", "\t",
      "\r\n", "0", "000", "1234567", ".", "!?", "...", "\xC3\xA9", "\xE4\xB8\xAD\xE6\x96\x87",
      "\xD0\xBC\xD0\xB8\xD1\x80", "\xF0\x9F\x98\x80", "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD",
      "\xE2\x80\x8D", "\xC2\xA0", "\xE3\x80\x80", "\xFF", "\xE2\x82", "\xC0\xAF", "\xED\xA0\x80",
      "<|endoftext|>", "<|endoftext", "|>", "<|", "'"};
  std::string text;
  while (text.size() < bytes) {
    if (rng() % 8 == 0) {
      text += static_cast<char>(rng() % 256);  // any byte at all
    } else {
      text += fragments[rng() % fragments.size()];
    }
  }
  return text;
}

void check_properties(const Tokenizer& tokenizer) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 300; ++trial) {
    const std::string text = random_text(rng, rng() % 200);
    INFO("trial " << trial);
    const auto ids = tokenizer.encode(text);
    CHECK(tokenizer.decode(ids) == ampt::text::replace_invalid_utf8(text));
    CHECK(tokenizer.decode(tokenizer.encode(text, SpecialTokens::allowed)) ==
          ampt::text::replace_invalid_utf8(text));
  }
  for (const std::size_t size : {std::size_t{300000}, std::size_t{1200000}}) {
    const std::string text = random_text(rng, size);
    for (const SpecialTokens specials : {SpecialTokens::as_text, SpecialTokens::allowed}) {
      const auto serial = tokenizer.encode(text, specials);
      for (const int threads : {2, 3, 8}) {
        INFO(size << " bytes, " << threads << " threads");
        CHECK(tokenizer.encode_parallel(text, threads, specials) == serial);
      }
    }
  }
  std::vector<std::string> texts;
  for (int i = 0; i < 50; ++i) texts.push_back(random_text(rng, rng() % 3000));
  const std::vector<std::string_view> views(texts.begin(), texts.end());
  const auto batch = tokenizer.encode_batch(views, 3, SpecialTokens::allowed);
  REQUIRE(batch.size() == texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i) CHECK(batch[i] == tokenizer.encode(texts[i], SpecialTokens::allowed));
}

}  // namespace

TEST_CASE("text: round trip and parallel encoding on random text with a toy vocabulary", "[text]") {
  check_properties(Tokenizer(ampt::test::english_toy_vocabulary()));
}

TEST_CASE("text: round trip and parallel encoding on random text with GPT-2's vocabulary", "[text]") {
  if (!ampt::test::have_gpt2_ranks()) {
    AMPT_SKIP(reference, "skipping: " << ampt::test::gpt2_ranks_path() << " not fetched (run scripts/bootstrap.sh)");
  }
  check_properties(ampt::text::load_tokenizer(ampt::test::gpt2_ranks_path()));
}
