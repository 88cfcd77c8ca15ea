// text: and jsonl: datasets: bytes or a tokenizer's ids, packed windows or padded examples, the
// token cache and the errors of a mismatched tokenizer.
#include "ampt/core/errors.h"
#include "ampt/data/document_examples.h"
#include "ampt/data/registry.h"
#include "ampt/data/token_file.h"
#include "ampt/text/hf_tokenizer_writer.h"
#include "ampt/text/tokenizer_files.h"
#include "data/data_fixtures.h"
#include "support/process.h"

#include <catch2/catch.hpp>

#include <filesystem>

using namespace ampt::data;
using ampt::config::Config;
using ampt::test::as_vector;
using ampt::test::make_temp_dir;
using ampt::test::write_file;

namespace {

struct TextFixture {
  std::string dir = make_temp_dir();
  std::string tokenizer = dir + "/toy.tiktoken";
  TextFixture() { write_file(tokenizer, ampt::test::toy_tiktoken()); }

  Config config(const std::string& dataset) const {
    Config c;
    c.dataset = dataset;
    c.tokenizer = tokenizer;
    c.val_fraction = 0;
    c.output_dir = dir + "/out";
    return c;
  }
};

std::vector<int64_t> ids(const ampt::text::Tokenizer& tokenizer, const std::string& text) {
  const auto encoded = tokenizer.encode(text);
  return {encoded.begin(), encoded.end()};
}

// Every sample's inputs, then every sample's targets, in order.
Batch everything(const Dataset& dataset) {
  std::vector<int64_t> indices(static_cast<size_t>(dataset.size()));
  for (size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<int64_t>(i);
  return dataset.gather(indices);
}

// A GPT-2-style tokenizer (tokenizer.json in `dir`) whose <|endoftext|> is 65536, beyond
// uint16: the 256 bytes, then every pair of bytes (a, b) with b < 255 as id 256 + a + 256 b.
std::string beyond_uint16_tokenizer(const std::string& dir) {
  ampt::text::Vocabulary v;
  v.source = "beyond uint16";
  for (int b = 0; b < 256; ++b) v.tokens.emplace_back(1, static_cast<char>(b));
  for (int32_t i = 0; i < 65536 - 256; ++i) {
    const auto id = static_cast<int32_t>(v.tokens.size());
    v.merges.push_back({i % 256, i / 256, i, id});
    v.tokens.push_back(v.tokens[static_cast<size_t>(i % 256)] + v.tokens[static_cast<size_t>(i / 256)]);
  }
  v.special_ids.push_back(static_cast<int32_t>(v.tokens.size()));
  v.tokens.emplace_back("<|endoftext|>");
  write_file(dir + "/tokenizer.json", ampt::text::tokenizer_json(v));
  return dir;
}

std::size_t files_in(const std::string& dir) {
  return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator(dir),
                                                std::filesystem::directory_iterator()));
}

}  // namespace

TEST_CASE("text: tokenized documents joined by <|endoftext|> and cut into windows",
          "[data][text]") {
  const TextFixture f;
  write_file(f.dir + "/docs/a.txt", "the thing in the ring");
  write_file(f.dir + "/docs/b.txt", "and <|endoftext|> the end");
  write_file(f.dir + "/docs/notes.md", "not a .txt file: not read");
  const auto tokenizer = ampt::text::load_tokenizer(f.tokenizer);
  const int64_t eot = tokenizer.eot_id();
  std::vector<int64_t> stream{eot};
  for (const auto& part : {ids(tokenizer, "the thing in the ring"), std::vector<int64_t>{eot},
                           ids(tokenizer, "and <|endoftext|> the end")}) {
    stream.insert(stream.end(), part.begin(), part.end());
  }
  REQUIRE(std::count(stream.begin(), stream.end(), eot) == 2);  // the written one stays text

  auto config = f.config("text:" + f.dir + "/docs");
  config.max_length = 4;
  const auto splits = open_dataset(config, {SampleRequest::Form::tokens, 8, 300});
  CHECK(splits.spec.sample_shape == std::vector<int64_t>{4});
  const int64_t windows = (static_cast<int64_t>(stream.size()) - 1) / 4;
  REQUIRE(splits.train->size() == windows);
  const auto batch = everything(*splits.train);
  for (int64_t w = 0; w < windows; ++w) {
    INFO("window " << w);
    CHECK(as_vector(batch.inputs[w]) ==
          std::vector<int64_t>(stream.begin() + w * 4, stream.begin() + w * 4 + 4));
    CHECK(as_vector(batch.targets[w]) ==
          std::vector<int64_t>(stream.begin() + w * 4 + 1, stream.begin() + w * 4 + 5));
  }
  CHECK_THAT(splits.description,
             Catch::StartsWith("text:" + f.dir + "/docs: 2 documents, " +
                               std::to_string(stream.size()) + " tokens (GPT-2 BPE from " +
                               f.tokenizer + "), tokenized in "));
  CHECK_THAT(splits.description,
             Catch::EndsWith("; train " + std::to_string(windows) + " / val none windows of 4"));
}

TEST_CASE("text: the token cache is reused, and remade when an input or the tokenizer changes",
          "[data][text][cache]") {
  const TextFixture f;
  write_file(f.dir + "/a.txt", "the thing in the ring, the thing in the ring");
  auto config = f.config("text:" + f.dir + "/a.txt");
  config.token_cache = f.dir + "/cache";
  const SampleRequest request{SampleRequest::Form::tokens, 4, 300};
  int64_t reports = 0;
  int64_t last_done = -1, last_total = -1;
  const TokenizeProgress progress = [&](int64_t done, int64_t total) {
    ++reports;
    last_done = done;
    last_total = total;
  };

  const auto first = open_dataset(config, request, progress);
  CHECK_THAT(first.description, Catch::Contains(", tokenized in "));
  CHECK(reports > 0);
  CHECK(last_total == 44);  // the file's bytes
  CHECK(last_done == last_total);
  CHECK(files_in(config.token_cache) == 1);

  reports = 0;
  const auto second = open_dataset(config, request, progress);
  CHECK_THAT(second.description, Catch::Contains(", reusing " + config.token_cache + "/text-a.txt-"));
  CHECK(reports == 0);
  CHECK(files_in(config.token_cache) == 1);
  CHECK(torch::equal(everything(*first.train).inputs, everything(*second.train).inputs));

  // Another text: another shard, with its ids.
  write_file(f.dir + "/a.txt", "in the ring");
  const auto changed = open_dataset(config, request, progress);
  CHECK_THAT(changed.description, Catch::Contains(", tokenized in "));
  CHECK(files_in(config.token_cache) == 2);
  CHECK(changed.train->size() < first.train->size());

  // Another tokenizer (one merge fewer): another shard.
  write_file(f.dir + "/other.tiktoken", ampt::test::toy_tiktoken({"th", "the", " the", "in", "ing"}));
  config.tokenizer = f.dir + "/other.tiktoken";
  CHECK_THAT(open_dataset(config, request).description, Catch::Contains(", tokenized in "));
  CHECK(files_in(config.token_cache) == 3);
  // The same tokenizer read from another file: the same ids, the same shard.
  write_file(f.dir + "/copy.tiktoken", ampt::test::toy_tiktoken({"th", "the", " the", "in", "ing"}));
  config.tokenizer = f.dir + "/copy.tiktoken";
  CHECK_THAT(open_dataset(config, request).description, Catch::Contains(", reusing "));
  CHECK(files_in(config.token_cache) == 3);

  // The default place is output_dir/token_cache.
  config.token_cache.clear();
  open_dataset(config, request);
  CHECK(files_in(config.output_dir + "/token_cache") == 1);
}

TEST_CASE("text: a tokenizer beyond 65536 ids tokenizes into llm.c's uint32 shard",
          "[data][text][cache]") {
  const TextFixture f;
  const auto path = beyond_uint16_tokenizer(f.dir + "/big");
  write_file(f.dir + "/docs/a.txt", "the thing in the ring");
  write_file(f.dir + "/docs/b.txt", "and the end");
  const auto tokenizer = ampt::text::load_tokenizer(path);
  REQUIRE(tokenizer.vocab_size() == 65537);
  const int64_t eot = tokenizer.eot_id();
  REQUIRE(eot == 65536);
  std::vector<int64_t> stream;
  for (const auto* text : {"the thing in the ring", "and the end"}) {
    stream.push_back(eot);
    const auto part = ids(tokenizer, text);
    stream.insert(stream.end(), part.begin(), part.end());
  }

  auto config = f.config("text:" + f.dir + "/docs");
  config.tokenizer = path;
  config.token_cache = f.dir + "/cache";
  config.max_length = 3;
  const SampleRequest request{SampleRequest::Form::tokens, 3, 65537};
  const auto splits = open_dataset(config, request);
  const int64_t windows = (static_cast<int64_t>(stream.size()) - 1) / 3;
  REQUIRE(splits.train->size() == windows);
  const auto batch = everything(*splits.train);
  CHECK(as_vector(batch.inputs.flatten()) ==
        std::vector<int64_t>(stream.begin(), stream.begin() + windows * 3));
  CHECK(as_vector(batch.targets.flatten()) ==
        std::vector<int64_t>(stream.begin() + 1, stream.begin() + windows * 3 + 1));

  // The cached shard is llm.c's Llama-3 layout, and a second run reads it back.
  REQUIRE(files_in(config.token_cache) == 1);
  const auto shard = open_token_file(std::filesystem::directory_iterator(config.token_cache)->path());
  CHECK(shard.span.bytes_per_token == 4);
  CHECK(shard.span.count == static_cast<int64_t>(stream.size()));
  config.packing = false;
  const auto examples = open_dataset(config, request);
  CHECK_THAT(examples.description, Catch::Contains(": 2 documents, ") && Catch::Contains(", reusing "));
  REQUIRE(examples.train->size() == 2);
  const auto last = ids(tokenizer, "and the end");
  REQUIRE(last.size() >= 3);
  CHECK(as_vector(everything(*examples.train).inputs[1]) ==
        std::vector<int64_t>(last.begin(), last.begin() + 3));
  // The model's vocabulary must hold <|endoftext|>.
  CHECK_THROWS_WITH(open_dataset(config, {SampleRequest::Form::tokens, 3, 65536}),
                    Catch::EndsWith(" has 65537 tokens but the model's vocab_size is 65536: "
                                    "set --vocab_size to at least 65537"));
}

TEST_CASE("jsonl: --packing=false gives one padded example per document, padding not scored",
          "[data][text][jsonl]") {
  const TextFixture f;
  write_file(f.dir + "/d.jsonl",
             "{\"body\": \"the thing\"}\n"
             "{\"body\": \"\"}\n"
             "{\"body\": \"in the ring and in the thing and the ring and more\", \"text\": \"x\"}\n");
  auto config = f.config("jsonl:" + f.dir + "/d.jsonl");
  config.text_field = "body";
  config.packing = false;
  config.max_length = 6;
  const auto tokenizer = ampt::text::load_tokenizer(f.tokenizer);
  const int64_t eot = tokenizer.eot_id();
  const auto splits = open_dataset(config, {SampleRequest::Form::tokens, 8, 300});
  // The empty document has only its separator: nothing to predict.
  REQUIRE(splits.train->size() == 2);
  const auto batch = everything(*splits.train);
  CHECK(batch.inputs.sizes() == torch::IntArrayRef({2, 6}));

  auto first = ids(tokenizer, "the thing");
  first.push_back(eot);  // the document, then the separator that ends it
  REQUIRE(first.size() < 7);
  std::vector<int64_t> inputs(first.begin(), first.end() - 1);
  std::vector<int64_t> targets(first.begin() + 1, first.end());
  inputs.resize(6, eot);
  targets.resize(6, kIgnoredTarget);
  CHECK(as_vector(batch.inputs[0]) == inputs);
  CHECK(as_vector(batch.targets[0]) == targets);

  // Longer than max_length + 1 tokens: its first 7, no separator.
  const auto second = ids(tokenizer, "in the ring and in the thing and the ring and more");
  REQUIRE(second.size() > 7);
  CHECK(as_vector(batch.inputs[1]) == std::vector<int64_t>(second.begin(), second.begin() + 6));
  CHECK(as_vector(batch.targets[1]) == std::vector<int64_t>(second.begin() + 1, second.begin() + 7));

  CHECK_THAT(splits.description,
             Catch::Contains("one example per document, 1 dropped (nothing to predict), 1 "
                             "truncated to 7 tokens; train 2 / val none examples of up to 6 "
                             "tokens, padded"));
  config.text_field = "title";
  config.token_cache = f.dir + "/other_cache";
  CHECK_THROWS_WITH(open_dataset(config, {SampleRequest::Form::tokens, 8, 300}),
                    f.dir + "/d.jsonl: line 1: no string field \"title\"");
}

TEST_CASE("text and jsonl without a tokenizer: bytes as tokens, a newline between records",
          "[data][text][jsonl]") {
  const TextFixture f;
  write_file(f.dir + "/d.jsonl", "{\"text\": \"abc\"}\n\n{\"text\": \"de\"}\n{\"text\": \"f\"}\n");
  auto config = f.config("jsonl:" + f.dir + "/d.jsonl");
  config.tokenizer.clear();
  const auto packed = open_dataset(config, {SampleRequest::Form::tokens, 2, 256});
  // "abc\nde\nf": windows of 2 every 2 bytes.
  const auto windows_of_2 = everything(*packed.train);
  CHECK(as_vector(windows_of_2.inputs.flatten()) == std::vector<int64_t>{'a', 'b', 'c', '\n', 'd', 'e'});
  CHECK(as_vector(windows_of_2.targets.flatten()) == std::vector<int64_t>{'b', 'c', '\n', 'd', 'e', '\n'});
  CHECK_THAT(packed.description, Catch::Contains(": 3 documents, 8 bytes as tokens; train 3 / val"));

  config.packing = false;
  config.max_length = 2;
  const auto examples = open_dataset(config, {SampleRequest::Form::tokens, 2, 256});
  // "f" has nothing to predict; "abc" fits exactly; no separator in bytes.
  REQUIRE(examples.train->size() == 2);
  const auto batch = everything(*examples.train);
  CHECK(as_vector(batch.inputs.flatten()) == std::vector<int64_t>{'a', 'b', 'd', 0});
  CHECK(as_vector(batch.targets.flatten()) == std::vector<int64_t>{'b', 'c', 'e', kIgnoredTarget});

  // text: files stay whole documents and separate spans.
  write_file(f.dir + "/t1.txt", "hello");
  write_file(f.dir + "/t2.txt", "world!");
  auto text = f.config("text:" + f.dir + "/t*.txt");
  text.tokenizer.clear();
  const auto windows = open_dataset(text, {SampleRequest::Form::tokens, 2, 256});
  CHECK(windows.train->size() == 2 + 2);
  CHECK_THAT(windows.description, Catch::Contains(": 2 files, 11 bytes as tokens; train 4 / val"));
}

TEST_CASE("text data: a tokenizer beyond the model, a max_length beyond block_size",
          "[data][text][errors]") {
  const TextFixture f;
  write_file(f.dir + "/a.txt", "the thing");
  auto config = f.config("text:" + f.dir + "/a.txt");
  CHECK_THROWS_WITH(open_dataset(config, {SampleRequest::Form::tokens, 8, 256}),
                    "the tokenizer " + f.tokenizer + " has 263 tokens but the model's vocab_size "
                    "is 256: set --vocab_size to at least 263");
  CHECK_THROWS_AS(open_dataset(config, {SampleRequest::Form::tokens, 8, 256}), ampt::UsageError);
  config.max_length = 9;
  CHECK_THROWS_WITH(open_dataset(config, {SampleRequest::Form::tokens, 8, 300}),
                    "max_length 9 exceeds the model's block_size 8: lower --max_length or raise "
                    "--block_size");
  config.max_length = 0;
  config.tokenizer = f.dir + "/absent";
  CHECK_THROWS_WITH(open_dataset(config, {SampleRequest::Form::tokens, 8, 300}),
                    f.dir + "/absent: tokenizer not found");
  config.tokenizer.clear();
  write_file(f.dir + "/empty/a.md", "no text file here");
  config.dataset = "text:" + f.dir + "/empty";
  CHECK_THROWS_WITH(open_dataset(config, {SampleRequest::Form::tokens, 8, 300}),
                    f.dir + "/empty: no *.txt file in the directory");
}

TEST_CASE("text data: init_from's directory gives the tokenizer, unless --tokenizer names one", "[data][text][hf]") {
  const TextFixture f;
  write_file(f.dir + "/a.txt", "the thing in the ring");
  write_file(f.dir + "/model/gpt2.tiktoken", ampt::test::toy_tiktoken());
  auto config = f.config("text:" + f.dir + "/a.txt");
  config.tokenizer.clear();
  config.init_from = f.dir + "/model";
  const auto splits = open_dataset(config, {SampleRequest::Form::tokens, 4, 300});
  CHECK_THAT(splits.description, Catch::Contains("(GPT-2 BPE from " + f.dir + "/model/gpt2.tiktoken)"));
  // --tokenizer wins over init_from's files.
  config.tokenizer = f.tokenizer;
  CHECK_THAT(open_dataset(config, {SampleRequest::Form::tokens, 4, 300}).description,
             Catch::Contains("(GPT-2 BPE from " + f.tokenizer + ")"));
  config.tokenizer.clear();
  std::filesystem::remove(f.dir + "/model/gpt2.tiktoken");
  CHECK_THROWS_WITH(open_dataset(config, {SampleRequest::Form::tokens, 4, 300}),
                    Catch::StartsWith(f.dir + "/model: no tokenizer files") &&
                        Catch::EndsWith("(init_from " + f.dir + "/model's tokenizer; name one "
                                        "with --tokenizer)"));
}

TEST_CASE("text: --document_mask gives each window's documents positions of their own that "
          "restart after each end of text, and data without documents is refused",
          "[data][text][packing]") {
  const TextFixture f;
  write_file(f.dir + "/docs/a.txt", "the thing in the ring");
  write_file(f.dir + "/docs/b.txt", "and the end");
  auto config = f.config("text:" + f.dir + "/docs");
  config.max_length = 6;
  config.document_mask = true;
  const auto splits = open_dataset(config, {SampleRequest::Form::tokens, 8, 300});
  CHECK_THAT(splits.description,
             Catch::EndsWith(" windows of 6, documents masked from each other"));
  const auto batch = everything(*splits.train);
  REQUIRE(batch.positions.defined());
  CHECK(batch.starts.equal(sequence_starts(batch.positions)));
  const int64_t eot = ampt::text::load_tokenizer(f.tokenizer).eot_id();
  const auto inputs = as_vector(batch.inputs);
  const auto positions = as_vector(batch.positions);
  int64_t restarts = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    INFO("token " << i);
    const bool starts = i % 6 == 0 || inputs[i - 1] == eot;
    CHECK(positions[i] == (starts ? 0 : positions[i - 1] + 1));
    if (i % 6 != 0 && starts) ++restarts;
  }
  CHECK(restarts >= 1);  // a document starts inside some window
  config.document_mask = false;
  CHECK_FALSE(everything(*open_dataset(config, {SampleRequest::Form::tokens, 8, 300}).train)
                  .positions.defined());

  config.document_mask = true;
  config.tokenizer.clear();
  CHECK_THROWS_AS(open_dataset(config, {SampleRequest::Form::tokens, 8, 300}), ampt::UsageError);
  CHECK_THROWS_WITH(open_dataset(config, {SampleRequest::Form::tokens, 8, 300}),
                    "--document_mask finds documents by their <|endoftext|>, which text:" + f.dir +
                        "/docs has none of without a tokenizer: name one with --tokenizer, or "
                        "drop --document_mask");
  config.dataset = "synthetic";
  CHECK_THROWS_WITH(open_dataset(config, {SampleRequest::Form::tokens, 8, 300}),
                    "--document_mask keeps the documents of text:, record (jsonl:, parquet:, arrow:) or "
                    "tokens: data apart; dataset 'synthetic' has no documents: drop --document_mask");
}
