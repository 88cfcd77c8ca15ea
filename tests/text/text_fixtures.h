// Shared by the tokenizer tests: GPT-2's fetched ranks, a toy vocabulary, the pre-tokenizer's
// pieces of a text, the corpus the reference comparisons encode, and the ids a reference wrote.
#pragma once

#include "ampt/core/json_reader.h"
#include "ampt/text/pretokenizer.h"
#include "ampt/text/tokenizer.h"
#include "ampt/text/vocabulary.h"

#include <filesystem>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ampt::test {

// scripts/bootstrap.sh fetches GPT-2's ranks (from openai-whisper's source distribution) here.
inline std::string gpt2_ranks_path() { return AMPT_SOURCE_DIR "/.deps/gpt2.tiktoken"; }

inline bool have_gpt2_ranks() { return std::filesystem::exists(gpt2_ranks_path()); }

// The 256 byte tokens (id = byte), then one token per merge in order, and <|endoftext|> last.
inline text::Vocabulary toy_vocabulary(const std::vector<std::pair<std::string, std::string>>& merges) {
  text::Vocabulary v;
  v.source = "toy";
  for (int b = 0; b < 256; ++b) v.tokens.emplace_back(1, static_cast<char>(b));
  const auto id_of = [&](const std::string& bytes) {
    for (std::size_t id = 0; id < v.tokens.size(); ++id) {
      if (v.tokens[id] == bytes) return static_cast<int32_t>(id);
    }
    throw std::logic_error("toy merge of an unknown token " + bytes);
  };
  for (const auto& [left, right] : merges) {
    const auto rank = static_cast<int32_t>(v.merges.size());
    v.merges.push_back({id_of(left), id_of(right), rank, static_cast<int32_t>(v.tokens.size())});
    v.tokens.push_back(left + right);
  }
  v.special_ids.push_back(static_cast<int32_t>(v.tokens.size()));
  v.tokens.emplace_back("<|endoftext|>");
  return v;
}

// A tokenizer of the 256 bytes (no merges), <|endoftext|> (256) and `specials` from 257 on, with
// BOS id `bos` (-1: none).
inline text::Tokenizer byte_tokenizer(const std::vector<std::string>& specials = {}, int bos = -1) {
  text::Vocabulary v = toy_vocabulary({});
  for (const std::string& special : specials) {
    v.special_ids.push_back(static_cast<int32_t>(v.tokens.size()));
    v.tokens.push_back(special);
  }
  v.bos = bos;
  return text::Tokenizer(std::move(v));
}

// Merges for common English pairs, enough to make BPE do real work in property tests.
inline text::Vocabulary english_toy_vocabulary() {
  return toy_vocabulary({{"t", "h"}, {"th", "e"}, {" ", "the"}, {"i", "n"}, {"in", "g"}, {"e", "r"},
                         {" ", "a"}, {"a", "n"}, {"an", "d"}, {" ", "and"}, {"o", "n"}, {" ", "t"},
                         {"e", "s"}, {"es", "t"}, {" ", "s"}, {"0", "0"}, {"00", "0"}, {" ", " "},
                         {"  ", "  "}, {"\n", "\n"}, {"\xC3", "\xA9"}, {"\xE4", "\xB8"}});
}

inline std::vector<std::string> pieces(std::string_view text,
                                       text::PreTokenizer pattern = text::PreTokenizer::gpt2) {
  std::vector<std::string> out;
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t end = text::piece_end(pattern, text, pos);
    out.emplace_back(text.substr(pos, end - pos));
    pos = end;
  }
  return out;
}

// A reference script's JSON array of token ids.
inline std::vector<int32_t> id_list(const JsonValue& array) {
  std::vector<int32_t> out;
  for (const auto& item : array.items) out.push_back(static_cast<int32_t>(item.number));
  return out;
}

// Text that tells pre-tokenizers and BPE implementations apart: many scripts, emoji with
// modifiers and ZWJ sequences, code, digit runs of 1 to 10, whitespace runs with \r\n and tabs,
// contractions in every case, punctuation before letters, text not in NFC, ill-formed UTF-8,
// special tokens whole and broken, long runs; last, a 400 KB mix of them all (the parallel path).
inline std::vector<std::string> adversarial_corpus() {
  std::vector<std::string> cases = {
      "Hello, world! It's a test. We'll see: they're, I've, I'm, he'd, she's, don't.",
      "IT'S DON'T WE'LL 'S 'T 'Re 'VE ''s '' 's x'",
      "I'M WE'LL they'Re YOU'VE she'D it'S don'T 'LL 'lL 'Ve 'mE x'\xC5\xBF '\xC5\xBF" "a 'K '\xE2\x84\xAA",
      "\xC3\x87" "a va? D\xC3\xA9j\xC3\xA0 vu, na\xC3\xAFve caf\xC3\xA9, Stra\xC3\x9F" "e, \xC3\x86r\xC3\xB8sk\xC3\xB8" "bing, \xC5\x81\xC3\xB3" "d\xC5\xBA",
      "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82, \xD0\xBC\xD0\xB8\xD1\x80! \xD0\xA1\xD1\x8A\xD0\xB5\xD1\x88\xD1\x8C \xD0\xB6\xD0\xB5 \xD0\xB5\xD1\x89\xD1\x91.",
      "\xCE\x93\xCE\xB5\xCE\xB9\xCE\xAC \xCF\x83\xCE\xBF\xCF\x85 \xCE\x9A\xCF\x8C\xCF\x83\xCE\xBC\xCE\xB5\xC2\xB7 \xCE\xBE\xCE\xB5\xCF\x83\xCE\xBA\xCE\xB5\xCF\x80\xCE\xAC\xCE\xB6\xCF\x89",
      "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C\xEF\xBC\x81\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE3\x83\x86\xE3\x82\xAD\xE3\x82\xB9\xE3\x83\x88\xE3\x80\x81\xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4 \xEB\xAC\xB8\xEC\x9E\xA5",
      "\xE4\xB8\xAD\xE6\x96\x87" "English\xE6\xB7\xB7\xE5\x90\x88" "123\xE3\x83\x86\xE3\x82\xB9\xE3\x83\x88\xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4\xEF\xBC\x8C\xE3\x80\x82\xEF\xBC\x81\xE3\x80\x8C\xE5\xBC\x95\xE7\x94\xA8\xE3\x80\x8D" "2026\xE5\xB9\xB4",
      "\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7 \xD8\xA8\xD8\xA7\xD9\x84\xD8\xB9\xD8\xA7\xD9\x84\xD9\x85 \xD9\xA1\xD9\xA2\xD9\xA3 \xD9\xA4\xD9\xA5\xD9\xA6",
      "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87 \xE0\xA4\xA6\xE0\xA5\x81\xE0\xA4\xA8\xE0\xA4\xBF\xE0\xA4\xAF\xE0\xA4\xBE\xE0\xA5\xA4",
      "\xE0\xB8\xAA\xE0\xB8\xA7\xE0\xB8\xB1\xE0\xB8\xAA\xE0\xB8\x94\xE0\xB8\xB5\xE0\xB8\x8A\xE0\xB8\xB2\xE0\xB8\xA7\xE0\xB9\x82\xE0\xB8\xA5\xE0\xB8\x81",
      "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7\xE2\x80\x8D\xF0\x9F\x91\xA6 "
      "\xF0\x9F\x8F\xB3\xEF\xB8\x8F\xE2\x80\x8D\xF0\x9F\x8C\x88 \xE2\x9D\xA4\xEF\xB8\x8F \xF0\x9F\xA4\xB7\xF0\x9F\x8F\xBB\xE2\x80\x8D\xE2\x99\x80\xEF\xB8\x8F x\xF0\x9F\x98\x80\xF0\x9F\x98\x83",
      "  leading", "trailing   ", "\t\ttabs\tand  spaces \n\n\n", "a \n\t b", "\r\n windows\r\n",
      "a\r\n\r\nb \r\n  c\t\r\n\td  \n\n  e\r\r\nf;\r\n\r\n  g.\n\nNext!\r\n?\n \n",
      "mixed \xC2\xA0 nbsp\xE3\x80\x80ideographic\xE2\x80\x83" "em", "   ", "\n", " ", "x\x0B\x0C\x1C\x1Dy",
      "def f(x):\n    return x**2  # square\n\n\nint main() { return a->b[0] != 0 ? 1 : -1; }\n",
      "if (x) {\n\treturn 0;\r\n}\n    // comment\n\t\tfoo(bar, baz);\n<div class=\"a\">&amp;</div>\n",
      "3.14159 1234567890123456789012345 1,000,000 2026-11-23 x2 2x \xD9\xA3\xD9\xA4 \xC2\xBD \xE2\x85\xA7",
      "1 12 123 1234 12345 123456 1234567 12345678 123456789 1234567890 x1234y +42 -7 $100 \xD9\xA1\xD9\xA2\xD9\xA3\xD9\xA4",
      "!!!??? ... --- *** ((())) \"quoted\" 'single' \xE2\x80\x9C" "fancy\xE2\x80\x9D \xC2\xAB\xC2\xBB",
      "(word) [x] {y} 'apos @user #tag $var %p *bold* _under_ ~t \xC2\xBFQu\xC3\xA9? \xC2\xA1Hola! \xC2\xAB" "ciao\xC2\xBB",
      "cafe\xCC\x81 A\xCC\x8A \xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8 A\xCC\x81\xCC\xA3 n\xCC\x83 \xEF\xAC\x81 \xE2\x84\xAB",  // not NFC
      "doc one<|endoftext|>doc two <|endoftext|>\n<|endoftext|><|endoftext|>end",
      "<|endoftext| <|endoftext <endoftext|> <|endoftext|>",
      "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<|extra_0|><|extra_204|><|extra_205|>",
      "<|begin_of_text|>hi<|end_of_text|><|eot_id|> <|begin_of_text|",
      "abc\xFF\xFE def \xE2\x82 x \xED\xA0\x80 \xC0\xAF \xF4\x90\x80\x80 end\xE2",
      "e\xCC\x81 \xE2\x80\x8D \xE1\xB2\x89\xE1\xB2\x8A \xD5\x98 \xF0\x91\xB7\xA0",  // combining, ZWJ, Unicode 16, after 16
      std::string(1000, 'a'), std::string(300, ' ') + "x", std::string(500, '7'), std::string(200, '!'),
      std::string(100, '\n') + "x" + std::string(50, '\r') + std::string(30, '\t'),
  };
  // A large mixed text, to compare long inputs and the parallel path too.
  std::mt19937 rng(3);
  std::string mixed;
  const std::size_t parts = cases.size();
  while (mixed.size() < 400000) mixed += cases[rng() % parts] + (rng() % 3 == 0 ? "\n" : " ");
  cases.push_back(mixed);
  return cases;
}

}  // namespace ampt::test
