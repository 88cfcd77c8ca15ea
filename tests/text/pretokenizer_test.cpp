#include "ampt/text/pretokenizer.h"
#include "ampt/text/unicode_class.h"
#include "text/text_fixtures.h"

#include <catch2/catch.hpp>

#include <random>

using ampt::test::pieces;
using ampt::text::CodeClass;
using ampt::text::code_class;
using Pieces = std::vector<std::string>;

TEST_CASE("text: pre-tokenizer splits words, numbers, punctuation and contractions as GPT-2's pattern", "[text]") {
  CHECK(pieces("Hello world") == Pieces{"Hello", " world"});
  CHECK(pieces("it's they're I've we'll he'd I'm don't") ==
        Pieces{"it", "'s", " they", "'re", " I", "'ve", " we", "'ll", " he", "'d", " I", "'m", " don", "'t"});
  // Contractions are lower case only; an apostrophe run swallows the quote before "s".
  CHECK(pieces("IT'S ''s") == Pieces{"IT", "'", "S", " ''", "s"});
  CHECK(pieces("'sa") == Pieces{"'s", "a"});
  CHECK(pieces("abc123def") == Pieces{"abc", "123", "def"});
  CHECK(pieces(" 42 x!!! ?") == Pieces{" 42", " x", "!!!", " ?"});
  CHECK(pieces("caf\xC3\xA9 \xD0\xBC\xD0\xB8\xD1\x80") == Pieces{"caf\xC3\xA9", " \xD0\xBC\xD0\xB8\xD1\x80"});
}

TEST_CASE("text: pre-tokenizer keeps the last space of a run for the next word and whitespace at the end whole", "[text]") {
  CHECK(pieces("a   b") == Pieces{"a", "  ", " b"});
  CHECK(pieces("a\n\nb") == Pieces{"a", "\n", "\n", "b"});
  CHECK(pieces("a \n\t b") == Pieces{"a", " \n\t", " b"});
  CHECK(pieces("a  \n") == Pieces{"a", "  \n"});
  CHECK(pieces("   ") == Pieces{"   "});
  CHECK(pieces("\tx") == Pieces{"\t", "x"});
  CHECK(pieces("x \xE3\x80\x80y") == Pieces{"x", " ", "\xE3\x80\x80", "y"});  // U+3000 is \s
}

TEST_CASE("text: unicode classes follow tiktoken's tables", "[text]") {
  CHECK(code_class(U'a') == CodeClass::letter);
  CHECK(code_class(U'\u00E9') == CodeClass::letter);
  CHECK(code_class(U'\u4E2D') == CodeClass::letter);
  CHECK(code_class(U'\u1C89') == CodeClass::letter);  // Cyrillic Tje, new in Unicode 16
  CHECK(code_class(U'\u0558') == CodeClass::other);   // assigned after Unicode 16
  CHECK(code_class(U'\u0663') == CodeClass::number);  // Arabic-Indic three
  CHECK(code_class(U'\u00BD') == CodeClass::number);  // one half (No)
  CHECK(code_class(U'\u00A0') == CodeClass::space);
  CHECK(code_class(U'\u0085') == CodeClass::space);
  CHECK(code_class(U'\u001C') == CodeClass::other);   // str.isspace() says yes; \s does not
  CHECK(code_class(U'\u0301') == CodeClass::other);   // a combining mark (Mn) is not \p{L}
  CHECK(code_class(U'\U0001F600') == CodeClass::other);
  CHECK(code_class(0xD800) == CodeClass::other);
  CHECK(code_class(0x110000) == CodeClass::other);
}

TEST_CASE("text: Llama-3's and Qwen2's pre-tokenizers follow their ordered alternation", "[text]") {
  using ampt::text::PreTokenizer;
  const auto llama = [](std::string_view text) { return pieces(text, PreTokenizer::llama3); };
  const auto qwen = [](std::string_view text) { return pieces(text, PreTokenizer::qwen2); };
  // (?i:...): contractions in any case, and U+017F (long s) folds to s.
  CHECK(llama("IT'S We'Ll 'RE 'x x'\xC5\xBFo") == Pieces{"IT", "'S", " We", "'Ll", " '", "RE", " '", "x", " x", "'\xC5\xBF", "o"});
  // One leading character that is not a letter, number or newline joins a letter run.
  CHECK(llama("(hello \tworld\nx") == Pieces{"(hello", " ", "\tworld", "\n", "x"});
  CHECK(llama("...abc $x") == Pieces{"...", "abc", " $", "x"});
  // Digits in threes from the start of the run, or one by one; never with a space.
  CHECK(llama("1234567 x 12") == Pieces{"123", "456", "7", " x", " ", "12"});
  CHECK(qwen("1234 x") == Pieces{"1", "2", "3", "4", " x"});
  // Punctuation takes the newlines after it; whitespace runs end at their last newline.
  CHECK(llama("x;\r\n\r\n  y") == Pieces{"x", ";\r\n\r\n", " ", " y"});
  CHECK(llama("a \n \n  b") == Pieces{"a", " \n \n", " ", " b"});
  CHECK(llama("a  b  ") == Pieces{"a", " ", " b", "  "});
  CHECK(llama("e\xCC\x81t\xC3\xA9") == Pieces{"e", "\xCC\x81t\xC3\xA9"});  // a combining mark is not \p{L}
}

TEST_CASE("text: a safe cut splits text into the same pieces as the whole text", "[text]") {
  // Random strings over characters that exercise every rule: contractions, spaces before words,
  // whitespace runs, several scripts, numbers, punctuation.
  const std::vector<std::string> alphabet = {"a", "s", "t", "l", "e", "'", " ", " ", "\n", "\t", "1",
                                             "!", ".", "\xC3\xA9", "\xE4\xB8\xAD", "\xD9\xA3",
                                             "\xE3\x80\x80", "\xF0\x9F\x98\x80", "\xCC\x81",
                                             "S", "L", "\r", "2", "\xC5\xBF"};
  using ampt::text::PreTokenizer;
  for (const PreTokenizer pattern : {PreTokenizer::gpt2, PreTokenizer::llama3, PreTokenizer::qwen2}) {
    std::mt19937 rng(7);
    int cuts = 0;
    for (int trial = 0; trial < 400; ++trial) {
      std::string text;
      const int length = 1 + static_cast<int>(rng() % 24);
      for (int i = 0; i < length; ++i) text += alphabet[rng() % alphabet.size()];
      const Pieces whole = pieces(text, pattern);
      for (std::size_t pos = 1; pos < text.size(); ++pos) {
        if ((static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) continue;
        if (!ampt::text::is_safe_cut(pattern, text, pos)) continue;
        ++cuts;
        Pieces joined = pieces(std::string_view(text).substr(0, pos), pattern);
        const Pieces rest = pieces(std::string_view(text).substr(pos), pattern);
        joined.insert(joined.end(), rest.begin(), rest.end());
        INFO("pattern " << ampt::text::pre_tokenizer_name(pattern) << ", text '" << text << "' cut at " << pos);
        REQUIRE(joined == whole);
      }
    }
    CHECK(cuts > 1000);
  }
}
