#include "ampt/core/errors.h"
#include "ampt/text/tokenize_files.h"
#include "support/process.h"
#include "text/text_fixtures.h"

#include <catch2/catch.hpp>

using ampt::test::write_file;
using ampt::text::SpecialTokens;
using ampt::text::Tokenizer;

namespace {

std::vector<int32_t> run(const Tokenizer& tokenizer, const std::vector<std::string>& paths,
                         SpecialTokens specials, ampt::text::TokenizeFilesStats* stats = nullptr) {
  std::vector<int32_t> ids;
  ampt::text::TokenizeFilesOptions options;
  options.threads = 2;
  options.specials = specials;
  const auto result = ampt::text::tokenize_files(tokenizer, paths, options,
                                                 [&](std::span<const int32_t> part) { ids.insert(ids.end(), part.begin(), part.end()); });
  if (stats != nullptr) *stats = result;
  return ids;
}

}  // namespace

TEST_CASE("text: tokenize_files puts <|endoftext|> before each text file and JSON Lines document", "[text]") {
  const Tokenizer tokenizer(ampt::test::english_toy_vocabulary());
  const std::string dir = ampt::test::make_temp_dir();
  write_file(dir + "/a.txt", "the thing\n");
  write_file(dir + "/b.jsonl", "{\"text\": \"and the\\n<|endoftext|>\", \"id\": 1}\n\n  \n{\"id\": 2, \"text\": \"caf\\u00e9\"}\n");
  ampt::text::TokenizeFilesStats stats;
  const auto ids = run(tokenizer, {dir + "/a.txt", dir + "/b.jsonl"}, SpecialTokens::allowed, &stats);
  const int32_t eot = tokenizer.eot_id();
  std::vector<int32_t> expected{eot};
  for (const std::string document : {"the thing\n", "and the\n<|endoftext|>", "caf\xC3\xA9"}) {
    const auto part = tokenizer.encode(document, SpecialTokens::allowed);
    expected.insert(expected.end(), part.begin(), part.end());
    expected.push_back(eot);
  }
  expected.pop_back();
  CHECK(ids == expected);
  CHECK(stats.documents == 3);
  CHECK(stats.bytes == 10 + 21 + 5);
  CHECK(stats.tokens == static_cast<int64_t>(ids.size()));
  // As text, the <|endoftext|> written in a document is not the separator's id.
  const auto as_text = run(tokenizer, {dir + "/b.jsonl"}, SpecialTokens::as_text);
  CHECK(std::count(as_text.begin(), as_text.end(), eot) == 2);
}

TEST_CASE("text: tokenize_files frames each document with the EOS and then the BOS of a tokenizer with one", "[text]") {
  auto vocabulary = ampt::test::english_toy_vocabulary();  // Llama-3's framing on a toy
  vocabulary.bos = static_cast<int32_t>(vocabulary.tokens.size());
  vocabulary.special_ids.push_back(vocabulary.bos);
  vocabulary.tokens.emplace_back("<|begin_of_text|>");
  const Tokenizer tokenizer(std::move(vocabulary));
  const std::string dir = ampt::test::make_temp_dir();
  write_file(dir + "/a.jsonl", "{\"text\": \"the thing\"}\n{\"text\": \"and the\"}\n");
  ampt::text::TokenizeFilesStats stats;
  const auto ids = run(tokenizer, {dir + "/a.jsonl"}, SpecialTokens::as_text, &stats);
  std::vector<int32_t> expected;
  for (const std::string document : {"the thing", "and the"}) {
    expected.push_back(tokenizer.eot_id());
    expected.push_back(tokenizer.bos_id());
    const auto part = tokenizer.encode(document);
    expected.insert(expected.end(), part.begin(), part.end());
  }
  CHECK(ids == expected);
  CHECK(stats.tokens == static_cast<int64_t>(ids.size()));
}

TEST_CASE("text: tokenize_files names the file and line of a bad JSON Lines document", "[text]") {
  const Tokenizer tokenizer(ampt::test::english_toy_vocabulary());
  const std::string dir = ampt::test::make_temp_dir();
  write_file(dir + "/bad.jsonl", "{\"text\": \"ok\"}\n{\"text\": \"cut\n");
  CHECK_THROWS_WITH(run(tokenizer, {dir + "/bad.jsonl"}, SpecialTokens::as_text),
                    Catch::Contains(dir + "/bad.jsonl: line 2: invalid JSON"));
  write_file(dir + "/notext.jsonl", "{\"body\": \"x\"}\n");
  CHECK_THROWS_WITH(run(tokenizer, {dir + "/notext.jsonl"}, SpecialTokens::as_text),
                    Catch::Contains(dir + "/notext.jsonl: line 1: no string field \"text\""));
  CHECK_THROWS_AS(run(tokenizer, {dir + "/missing.txt"}, SpecialTokens::as_text), ampt::RuntimeError);
}

TEST_CASE("text: tokenize_files reads the format and field it is told, reporting input bytes", "[text]") {
  const Tokenizer tokenizer(ampt::test::english_toy_vocabulary());
  const std::string dir = ampt::test::make_temp_dir();
  const std::string records = "{\"body\": \"the thing\"}\n\n{\"body\": \"and the\", \"text\": \"no\"}\n";
  write_file(dir + "/records.txt", records);  // JSON Lines whatever the name says
  write_file(dir + "/plain.jsonl", "not JSON at all");
  ampt::text::TokenizeFilesOptions options;
  options.threads = 2;
  options.format = ampt::text::InputFormat::records;
  options.text_field = "body";
  std::vector<std::pair<int64_t, int64_t>> reports;
  options.progress = [&](int64_t done, int64_t total) { reports.emplace_back(done, total); };
  std::vector<int32_t> ids;
  const auto append = [&](std::span<const int32_t> part) { ids.insert(ids.end(), part.begin(), part.end()); };
  const auto stats = ampt::text::tokenize_files(tokenizer, {dir + "/records.txt"}, options, append);
  const int32_t eot = tokenizer.eot_id();
  std::vector<int32_t> expected{eot};
  for (const auto& part : {tokenizer.encode("the thing"), std::vector<int32_t>{eot}, tokenizer.encode("and the")}) {
    expected.insert(expected.end(), part.begin(), part.end());
  }
  CHECK(ids == expected);
  CHECK(stats.documents == 2);
  REQUIRE_FALSE(reports.empty());
  for (std::size_t i = 0; i < reports.size(); ++i) {
    INFO("report " << i);
    CHECK(reports[i].second == static_cast<int64_t>(records.size()));
    if (i > 0) CHECK(reports[i].first >= reports[i - 1].first);
  }
  CHECK(reports.back().first == static_cast<int64_t>(records.size()));

  // Told text, a .jsonl file is one document, its bytes as they are.
  ids.clear();
  options.format = ampt::text::InputFormat::text;
  ampt::text::tokenize_files(tokenizer, {dir + "/plain.jsonl"}, options, append);
  expected = {eot};
  const auto whole = tokenizer.encode("not JSON at all");
  expected.insert(expected.end(), whole.begin(), whole.end());
  CHECK(ids == expected);
}
