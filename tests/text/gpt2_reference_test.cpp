// GPT-2's real tokenizer against tiktoken and Hugging Face tokenizers, id for id, from all three
// file formats; and the generated Unicode tables against tiktoken's regex engine.
#include "ampt/core/json_reader.h"
#include "ampt/text/tokenizer_files.h"
#include "ampt/text/unicode_class.h"
#include "ampt/text/utf8.h"
#include "support/process.h"
#include "text/text_fixtures.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <random>
#include <sstream>

using ampt::text::SpecialTokens;

namespace {

const std::string kScript = AMPT_SOURCE_DIR "/tests/text/gpt2_reference.py";

// The reference libraries (scripts/bootstrap.sh installs them); false after one warning line.
bool have_references() {
  if (!std::filesystem::exists(AMPT_PYTHON)) {
    WARN("skipping the Python comparison: " AMPT_PYTHON " not found");
    return false;
  }
  if (ampt::test::run_process({AMPT_PYTHON, "-c", "import tiktoken, tokenizers, transformers"}).exit_code != 0) {
    WARN("skipping: tiktoken, tokenizers or transformers missing in " AMPT_PYTHON " (run scripts/bootstrap.sh)");
    return false;
  }
  return true;
}

std::vector<std::string> corpus() {
  std::vector<std::string> cases = {
      "Hello, world! It's a test. We'll see: they're, I've, I'm, he'd, she's, don't.",
      "IT'S DON'T WE'LL 'S 'T 'Re 'VE ''s '' 's x'",
      "\xC3\x87" "a va? D\xC3\xA9j\xC3\xA0 vu, na\xC3\xAFve caf\xC3\xA9, Stra\xC3\x9F" "e, \xC3\x86r\xC3\xB8sk\xC3\xB8" "bing, \xC5\x81\xC3\xB3" "d\xC5\xBA",
      "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82, \xD0\xBC\xD0\xB8\xD1\x80! \xD0\xA1\xD1\x8A\xD0\xB5\xD1\x88\xD1\x8C \xD0\xB6\xD0\xB5 \xD0\xB5\xD1\x89\xD1\x91.",
      "\xCE\x93\xCE\xB5\xCE\xB9\xCE\xAC \xCF\x83\xCE\xBF\xCF\x85 \xCE\x9A\xCF\x8C\xCF\x83\xCE\xBC\xCE\xB5\xC2\xB7 \xCE\xBE\xCE\xB5\xCF\x83\xCE\xBA\xCE\xB5\xCF\x80\xCE\xAC\xCE\xB6\xCF\x89",
      "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C\xEF\xBC\x81\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE3\x83\x86\xE3\x82\xAD\xE3\x82\xB9\xE3\x83\x88\xE3\x80\x81\xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4 \xEB\xAC\xB8\xEC\x9E\xA5",
      "\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7 \xD8\xA8\xD8\xA7\xD9\x84\xD8\xB9\xD8\xA7\xD9\x84\xD9\x85 \xD9\xA1\xD9\xA2\xD9\xA3 \xD9\xA4\xD9\xA5\xD9\xA6",
      "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87 \xE0\xA4\xA6\xE0\xA5\x81\xE0\xA4\xA8\xE0\xA4\xBF\xE0\xA4\xAF\xE0\xA4\xBE\xE0\xA5\xA4",
      "\xE0\xB8\xAA\xE0\xB8\xA7\xE0\xB8\xB1\xE0\xB8\xAA\xE0\xB8\x94\xE0\xB8\xB5\xE0\xB8\x8A\xE0\xB8\xB2\xE0\xB8\xA7\xE0\xB9\x82\xE0\xB8\xA5\xE0\xB8\x81",
      "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7\xE2\x80\x8D\xF0\x9F\x91\xA6 "
      "\xF0\x9F\x8F\xB3\xEF\xB8\x8F\xE2\x80\x8D\xF0\x9F\x8C\x88 \xE2\x9D\xA4\xEF\xB8\x8F \xF0\x9F\xA4\xB7\xF0\x9F\x8F\xBB\xE2\x80\x8D\xE2\x99\x80\xEF\xB8\x8F x\xF0\x9F\x98\x80\xF0\x9F\x98\x83",
      "  leading", "trailing   ", "\t\ttabs\tand  spaces \n\n\n", "a \n\t b", "\r\n windows\r\n",
      "mixed \xC2\xA0 nbsp\xE3\x80\x80ideographic\xE2\x80\x83" "em", "   ", "\n", " ", "x\x0B\x0C\x1C\x1Dy",
      "def f(x):\n    return x**2  # square\n\n\nint main() { return a->b[0] != 0 ? 1 : -1; }\n",
      "3.14159 1234567890123456789012345 1,000,000 2026-11-23 x2 2x \xD9\xA3\xD9\xA4 \xC2\xBD \xE2\x85\xA7",
      "!!!??? ... --- *** ((())) \"quoted\" 'single' \xE2\x80\x9C" "fancy\xE2\x80\x9D \xC2\xAB\xC2\xBB",
      "doc one<|endoftext|>doc two <|endoftext|>\n<|endoftext|><|endoftext|>end",
      "<|endoftext| <|endoftext <endoftext|> <|endoftext|>",
      "abc\xFF\xFE def \xE2\x82 x \xED\xA0\x80 \xC0\xAF \xF4\x90\x80\x80 end\xE2",
      "e\xCC\x81 \xE2\x80\x8D \xE1\xB2\x89\xE1\xB2\x8A \xD5\x98 \xF0\x91\xB7\xA0",  // combining, ZWJ, Unicode 16, after 16
      std::string(1000, 'a'), std::string(300, ' ') + "x", std::string(500, '7'), std::string(200, '!'),
  };
  // A large mixed text, to compare long inputs and the parallel path too.
  std::mt19937 rng(3);
  std::string mixed;
  const std::size_t parts = cases.size();
  while (mixed.size() < 400000) mixed += cases[rng() % parts] + (rng() % 3 == 0 ? "\n" : " ");
  cases.push_back(mixed);
  return cases;
}

std::vector<int32_t> id_list(const ampt::JsonValue& array) {
  std::vector<int32_t> out;
  for (const auto& item : array.items) out.push_back(static_cast<int32_t>(item.number));
  return out;
}

}  // namespace

TEST_CASE("text: GPT-2 ids equal tiktoken's and Hugging Face's from tokenizer.json, vocab.json and tiktoken files", "[text][python]") {
  if (!ampt::test::have_gpt2_ranks()) {
    WARN("skipping: " << ampt::test::gpt2_ranks_path() << " not fetched (run scripts/bootstrap.sh)");
    return;
  }
  if (!have_references()) return;
  const std::string dir = ampt::test::make_temp_dir();
  const auto cases = corpus();
  for (std::size_t i = 0; i < cases.size(); ++i) ampt::test::write_file(dir + "/case" + std::to_string(i), cases[i]);
  const auto python = ampt::test::run_process(
      {AMPT_PYTHON, kScript, "ids", ampt::test::gpt2_ranks_path(), dir, std::to_string(cases.size())});
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
      CHECK(ordinary == id_list(*expected[i].find("ordinary")));
      CHECK(tokenizer.encode(cases[i], SpecialTokens::allowed) == id_list(*expected[i].find("allowed")));
      CHECK(tokenizer.encode(cases[i], SpecialTokens::allowed) == id_list(*expected[i].find("hf")));
      CHECK(tokenizer.decode(ordinary) == ampt::text::replace_invalid_utf8(cases[i]));
    }
    CHECK(tokenizer.encode_parallel(cases.back(), 3) == id_list(*expected.back().find("ordinary")));
    CHECK(tokenizer.encode_parallel(cases.back(), 2, SpecialTokens::allowed) ==
          id_list(*expected.back().find("allowed")));
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
  const auto python = ampt::test::run_process({AMPT_PYTHON, kScript, "classes", dir});
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
