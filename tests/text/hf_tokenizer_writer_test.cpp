// text/hf_tokenizer_writer: the tokenizer.json written for a vocabulary reads back as the same
// vocabulary and, for GPT-2's real ranks, encodes the adversarial corpus to the same ids (what
// transformers makes of it is tests/hf/tokenizer_export_test.cpp's).
#include "ampt/core/errors.h"
#include "ampt/text/hf_files.h"
#include "ampt/text/hf_tokenizer_writer.h"
#include "ampt/text/tokenizer_files.h"
#include "support/process.h"
#include "support/skip.h"
#include "text/text_fixtures.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <tuple>

using ampt::text::PreTokenizer;
using ampt::text::Vocabulary;

namespace {

// `vocabulary` through a tokenizer.json and back.
Vocabulary round_trip(const Vocabulary& vocabulary) {
  const auto path = ampt::test::make_temp_dir() + "/tokenizer.json";
  ampt::test::write_file(path, ampt::text::tokenizer_json(vocabulary));
  return ampt::text::read_tokenizer_json(path);
}

// The merges as (left, right, result) in rank order: the reader numbers ranks by position.
std::vector<std::tuple<int32_t, int32_t, int32_t>> ranked(const Vocabulary& v) {
  auto merges = v.merges;
  std::ranges::stable_sort(merges, [](const auto& a, const auto& b) {
    return std::tie(a.rank, a.left, a.right) < std::tie(b.rank, b.left, b.right);
  });
  std::vector<std::tuple<int32_t, int32_t, int32_t>> out;
  for (const auto& m : merges) out.emplace_back(m.left, m.right, m.result);
  return out;
}

}  // namespace

TEST_CASE("text: a byte-level vocabulary's tokenizer.json reads back as the same vocabulary", "[text][hf_writer]") {
  auto v = ampt::test::english_toy_vocabulary();
  // Two specials after the ordinary tokens (added tokens), one among them (in the vocab too).
  v.special_ids.insert(v.special_ids.begin(), 1);  // a control byte no merge uses
  v.tokens[1] = "<|pad|>";
  v.special_ids.push_back(static_cast<int32_t>(v.tokens.size()));
  v.tokens.emplace_back("<|im_end|>");
  for (const auto pattern : {PreTokenizer::gpt2, PreTokenizer::llama3, PreTokenizer::qwen2}) {
    for (const bool nfc : {false, true}) {
      INFO(ampt::text::pre_tokenizer_name(pattern) << (nfc ? " with NFC" : ""));
      v.pre_tokenizer = pattern;
      v.nfc = nfc;
      v.ignore_merges = nfc;
      v.bos = nfc ? v.special_ids.back() : -1;
      const auto back = round_trip(v);
      CHECK(back.tokens == v.tokens);
      auto specials = v.special_ids;
      std::ranges::sort(specials);
      CHECK(back.special_ids == specials);
      CHECK(ranked(back) == ranked(v));
      CHECK(back.pre_tokenizer == pattern);
      CHECK(back.nfc == nfc);
      CHECK(back.ignore_merges == v.ignore_merges);
      CHECK(back.bos == v.bos);
    }
  }
}

TEST_CASE("text: GPT-2's ranks through a written tokenizer.json give tiktoken's ids", "[text][hf_writer]") {
  if (!ampt::test::have_gpt2_ranks()) {
    AMPT_SKIP(reference, "skipping: " << ampt::test::gpt2_ranks_path() << " not fetched (run scripts/bootstrap.sh)");
  }
  const auto ranks = ampt::text::load_vocabulary(ampt::test::gpt2_ranks_path());
  const auto back = round_trip(ranks);
  CHECK(ranked(back) == ranked(ranks));
  const ampt::text::Tokenizer original(ranks);
  const ampt::text::Tokenizer written(back);
  for (const auto& text : ampt::test::adversarial_corpus()) {
    INFO(text.substr(0, 80));
    CHECK(written.encode(text, ampt::text::SpecialTokens::allowed) == original.encode(text, ampt::text::SpecialTokens::allowed));
  }
}

TEST_CASE("text: what has no byte-level tokenizer.json is refused in one line", "[text][hf_writer]") {
  auto v = ampt::test::english_toy_vocabulary();
  v.pre_tokenizer = PreTokenizer::sentencepiece;
  CHECK_THROWS_WITH(ampt::text::tokenizer_json(v),
                    "toy: a SentencePiece vocabulary is not written as a tokenizer.json: only byte-level "
                    "ones are (its own tokenizer.json is copied)");
  v = ampt::test::english_toy_vocabulary();
  v.tokens[270] = v.tokens[256];  // two ids, one token
  CHECK_THROWS_WITH(ampt::text::tokenizer_json(v),
                    "toy: token 270 is written \"th\" as another token is, which a tokenizer.json cannot hold");
}
