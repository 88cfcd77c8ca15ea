// GPT-2's real tokenizer against tiktoken and Hugging Face tokenizers, id for id, from all three
// file formats; and the generated Unicode tables against tiktoken's regex engine.
#include "ampt/core/json_reader.h"
#include "ampt/text/tokenizer_files.h"
#include "ampt/text/unicode_class.h"
#include "ampt/text/utf8.h"
#include "support/process.h"
#include "support/skip.h"
#include "support/python_modules.h"
#include "text/text_fixtures.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <sstream>

using ampt::text::SpecialTokens;

namespace {

const std::string kGpt2TokenizerScript = AMPT_SOURCE_DIR "/tests/text/gpt2_reference.py";

// The reference libraries (scripts/bootstrap.sh installs them); false after noting the skip.
bool have_references() {
  if (!std::filesystem::exists(AMPT_PYTHON)) {
    AMPT_NOTE_SKIP(reference, "skipping the Python comparison: " AMPT_PYTHON " not found");
    return false;
  }
  if (!ampt::test::python_has("tiktoken, tokenizers, transformers")) {
    AMPT_NOTE_SKIP(reference, "skipping: tiktoken, tokenizers or transformers missing in " AMPT_PYTHON " (run scripts/bootstrap.sh)");
    return false;
  }
  return true;
}

}  // namespace

TEST_CASE("text: GPT-2 ids equal tiktoken's and Hugging Face's from tokenizer.json, vocab.json and tiktoken files", "[text][python]") {
  if (!ampt::test::have_gpt2_ranks()) {
    AMPT_SKIP(reference, "skipping: " << ampt::test::gpt2_ranks_path() << " not fetched (run scripts/bootstrap.sh)");
  }
  if (!have_references()) return;
  const std::string dir = ampt::test::make_temp_dir();
  const auto cases = ampt::test::adversarial_corpus();
  for (std::size_t i = 0; i < cases.size(); ++i) ampt::test::write_file(dir + "/case" + std::to_string(i), cases[i]);
  const auto python = ampt::test::run_process(
      {AMPT_PYTHON, kGpt2TokenizerScript, "ids", ampt::test::gpt2_ranks_path(), dir, std::to_string(cases.size())});
  INFO(python.err);
  REQUIRE(python.exit_code == 0);
  const auto reference = ampt::parse_json(ampt::test::read_file(dir + "/reference.json"));
  const auto& expected = reference.find("cases")->items;
  REQUIRE(expected.size() == cases.size());

  for (const std::string& path : {dir + "/hf", dir + "/gpt2", ampt::test::gpt2_ranks_path()}) {
    const auto tokenizer = ampt::text::load_tokenizer(path);
    INFO(path);
    CHECK(tokenizer.vocab_size() == 50257);
    CHECK(tokenizer.eot_id() == 50256);
    for (std::size_t i = 0; i < cases.size(); ++i) {
      INFO("case " << i << ": " << cases[i].substr(0, 80));
      const auto ordinary = tokenizer.encode(cases[i]);
      CHECK(ordinary == ampt::test::id_list(*expected[i].find("ordinary")));
      CHECK(tokenizer.encode(cases[i], SpecialTokens::allowed) == ampt::test::id_list(*expected[i].find("allowed")));
      CHECK(tokenizer.encode(cases[i], SpecialTokens::allowed) == ampt::test::id_list(*expected[i].find("hf")));
      CHECK(tokenizer.decode(ordinary) == ampt::text::replace_invalid_utf8(cases[i]));
    }
    CHECK(tokenizer.encode_parallel(cases.back(), 3) == ampt::test::id_list(*expected.back().find("ordinary")));
    CHECK(tokenizer.encode_parallel(cases.back(), 2, SpecialTokens::allowed) ==
          ampt::test::id_list(*expected.back().find("allowed")));
  }
}

TEST_CASE("text: unicode tables agree with tiktoken's regex at both sides of every range edge", "[text][python]") {
  if (!have_references()) return;
  std::vector<char32_t> points;
  for (std::size_t i = 0; i < ampt::text::detail::kCodeRangeCount; ++i) {
    const auto& range = ampt::text::detail::kCodeRanges[i];
    for (const char32_t c : {char32_t(range.first - 1), range.first, range.last, char32_t(range.last + 1)}) {
      if (c < 0x110000 && (c < 0xD800 || c > 0xDFFF)) points.push_back(c);
    }
  }
  const std::string dir = ampt::test::make_temp_dir();
  std::ostringstream list;
  for (const char32_t c : points) list << std::hex << static_cast<uint32_t>(c) << "\n";
  ampt::test::write_file(dir + "/code_points", list.str());
  const auto python = ampt::test::run_process({AMPT_PYTHON, kGpt2TokenizerScript, "classes", dir});
  INFO(python.err);
  REQUIRE(python.exit_code == 0);
  std::istringstream classes(ampt::test::read_file(dir + "/classes"));
  const char* names[] = {"other", "letter", "number", "space"};
  int mismatches = 0;
  for (const char32_t c : points) {
    std::string expected;
    classes >> expected;
    const std::string ours = names[static_cast<int>(ampt::text::code_class(c))];
    if (ours != expected) {
      ++mismatches;
      UNSCOPED_INFO("U+" << std::hex << static_cast<uint32_t>(c) << ": " << ours << ", tiktoken " << expected);
    }
  }
  CHECK(points.size() > 2000);
  CHECK(mismatches == 0);
}
