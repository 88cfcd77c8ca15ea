// jsonl: instruction records (prompt/completion, messages): one padded example per window whose
// prompt targets are not scored, checked against a mask worked out by hand; --train_on_prompt;
// truncation; examples packed into windows with positions of their own; the token cache and
// `tokens:` shards keeping the loss mask beside the tokens, and a mask without example starts.
#include "ampt/core/errors.h"
#include "ampt/data/loss_mask.h"
#include "ampt/data/registry.h"
#include "ampt/data/text_shard.h"
#include "ampt/data/token_file.h"
#include "ampt/text/tokenize_chats.h"
#include "ampt/text/tokenizer_files.h"
#include "data/data_fixtures.h"
#include "support/process.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <numeric>
#include <utility>

using namespace ampt::data;
using ampt::config::Config;
using ampt::test::as_vector;
using ampt::test::make_temp_dir;
using ampt::test::write_file;

namespace {

constexpr int64_t x = kIgnoredTarget;
constexpr int64_t kEot = 262;  // toy_tiktoken's <|endoftext|>: 256 bytes and 6 merges before it
const SampleRequest kRequest{SampleRequest::Form::tokens, 12, 300};

struct Fixture {
  std::string dir = make_temp_dir();
  std::string tokenizer = dir + "/toy.tiktoken";
  std::string data = dir + "/sft.jsonl";
  Fixture() {
    write_file(tokenizer, ampt::test::toy_tiktoken());
    // Neither text merges ("th", "in", " a" ...): one token per byte.
    write_file(data, R"({"prompt": "Hi?", "completion": " Yes"})" "\n"
                     R"({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"},)"
                     R"( {"role": "assistant", "content": "A"}, {"role": "user", "content": "R"},)"
                     R"( {"role": "assistant", "content": "B"}]})" "\n");
  }
  Config config() const {
    Config c;
    c.dataset = "jsonl:" + data;
    c.tokenizer = tokenizer;
    c.val_fraction = 0;
    c.output_dir = dir + "/out";
    return c;
  }
};

std::vector<int64_t> bytes(const std::string& text) { return {text.begin(), text.end()}; }

std::vector<int64_t> padded(std::vector<int64_t> row, int64_t value, std::size_t length = 12) {
  row.resize(length, value);
  return row;
}

std::vector<int64_t> join(std::initializer_list<std::vector<int64_t>> rows) {
  std::vector<int64_t> out;
  for (const auto& row : rows) out.insert(out.end(), row.begin(), row.end());
  return out;
}

}  // namespace

TEST_CASE("instruction data: prompt tokens carry no loss, checked against a hand-computed mask",
          "[data][text][chat]") {
  const Fixture f;
  auto unpacked = f.config();
  unpacked.packing = false;
  const auto splits = open_dataset(unpacked, kRequest);
  CHECK_THAT(splits.description,
             Catch::Contains("2 plain examples, 15 tokens (GPT-2 BPE from " + f.tokenizer) &&
                 Catch::Contains("; instruction data, one example per window, loss on answers "
                                 "only; train 2 / val none examples of up to 12 tokens, padded"));
  const auto batch = splits.train->gather({0, 1});
  CHECK_FALSE(batch.positions.defined());
  // Plain template: "Hi?" " Yes" <|endoftext|>; messages: "S" "Q" "A"<eot> "R" "B"<eot>.
  CHECK(as_vector(batch.inputs) ==
        join({padded(join({bytes("Hi? Yes"), {kEot}}), kEot), padded(join({bytes("SQA"), {kEot}, bytes("RB")}), kEot)}));
  CHECK(as_vector(batch.targets) ==
        join({padded({x, x, ' ', 'Y', 'e', 's', kEot}, x),
              padded({x, 'A', kEot, x, 'B', kEot}, x)}));

  auto config = unpacked;
  config.train_on_prompt = true;
  const auto every = open_dataset(config, kRequest);
  CHECK_THAT(every.description, Catch::Contains("every token scored") && Catch::Contains("reusing"));
  CHECK(as_vector(every.train->gather({0}).targets) == padded(join({bytes("i? Yes"), {kEot}}), x));
}

TEST_CASE("instruction data: a chat_template.jinja beside the tokenizer renders the records, the data "
          "line naming it",
          "[data][text][chat][jinja]") {
  const Fixture f;
  write_file(f.dir + "/chat_template.jinja",
             "{% for m in messages %}{{ m.role[0] }}{% if m.role == 'assistant' %}{% generation %}"
             "{{ m.content }}{% endgeneration %}{% else %}{{ m.content }}{% endif %}{% endfor %}\n");
  auto config = f.config();
  config.packing = false;
  const auto splits = open_dataset(config, kRequest);
  CHECK_THAT(splits.description,
             Catch::Contains("2 examples (chat template " + f.dir + "/chat_template.jinja), 19 tokens"));
  const auto batch = splits.train->gather({0, 1});
  // "u" "Hi?" "a" " Yes", then "s" "S" "u" "Q" "a" "A" "u" "R" "a" "B" (the template's last newline
  // dropped, as jinja2 drops it): the generation blocks scored.
  CHECK(as_vector(batch.inputs) == join({padded(bytes("uHi?a Ye"), kEot), padded(bytes("sSuQaAuRa"), kEot)}));
  CHECK(as_vector(batch.targets) == join({padded({x, x, x, x, ' ', 'Y', 'e', 's'}, x),
                                          padded({x, x, x, x, 'A', x, x, x, 'B'}, x)}));
}

TEST_CASE("instruction data: truncated to max_length + 1 tokens and an example with no answer left dropped",
          "[data][text][chat]") {
  const Fixture f;
  write_file(f.data, R"({"prompt": "abcdef", "completion": "g"})" "\n"
                     R"({"prompt": "a", "completion": "bcdefgh"})" "\n");
  auto config = f.config();
  config.max_length = 4;
  const auto splits = open_dataset(config, kRequest);
  CHECK_THAT(splits.description,
             Catch::Contains("1 dropped (nothing to predict in the first 5 tokens), 1 truncated to 5 tokens"));
  REQUIRE(splits.train->size() == 1);
  CHECK(as_vector(splits.train->gather({0}).targets) == std::vector<int64_t>{'b', 'c', 'd', 'e'});

  write_file(f.data, R"({"prompt": "abcdef", "completion": "g"})" "\n");
  CHECK_THROWS_WITH(open_dataset(config, kRequest),
                    Catch::Contains(": none of its 1 examples has a scored token within its first 5: "
                                    "raise --max_length: nothing to learn from"));
}

TEST_CASE("instruction data: ampt tokenize's shard and loss mask round trip into tokens:",
          "[data][text][chat][tokens]") {
  const Fixture f;
  const auto tokenizer = ampt::text::load_tokenizer(f.tokenizer);
  const auto chat = ampt::text::builtin_chat_template(tokenizer);
  const std::string out = f.dir + "/sft_train.bin";
  const auto stats = write_text_shard(tokenizer, {f.data}, {}, out, &chat);
  CHECK(stats.documents == 2);
  CHECK(stats.tokens == 15);
  REQUIRE(std::filesystem::exists(f.dir + "/sft_train.mask"));
  // The mask file: llm.c's header with the mask's magic, then the bytes encode_chat gives.
  const std::string raw = ampt::test::read_file(f.dir + "/sft_train.mask");
  REQUIRE(raw.size() == 1024 + 15);
  CHECK(raw.substr(0, 12) == std::string("\x04\x29\x35\x01\x01\x00\x00\x00\x0f\x00\x00\x00", 12));
  std::vector<int32_t> ids;
  std::vector<uint8_t> mask;
  ampt::text::encode_chat(tokenizer, chat, {{ampt::text::Role::user, "Hi?"}, {ampt::text::Role::assistant, " Yes"}},
                          ids, mask);
  CHECK(mask == std::vector<uint8_t>{2, 0, 0, 1, 1, 1, 1, 1});
  CHECK(raw.substr(1024, 8) == std::string(mask.begin(), mask.end()));
  const auto tokens = open_token_file(out).span;
  CHECK(mask_examples(open_loss_mask(f.dir + "/sft_train.mask", tokens), 0).size() == 2);

  Config config = f.config();
  config.dataset = "tokens:" + out;
  const auto splits = open_dataset(config, kRequest);
  // Packed by default: 7 and 6 positions do not share a window of 12.
  CHECK_THAT(splits.description,
             Catch::Contains("1 file (llm.c, loss masks), 15 tokens") &&
                 Catch::Contains("; instruction data, packed 2 examples into 2 windows of 12: 54% "
                                 "scored or prompt tokens, 46% padding (unpacked: 46% padding); "
                                 "train 2 / val none windows of 12"));
  CHECK(as_vector(splits.train->gather({0}).targets) == padded({x, x, ' ', 'Y', 'e', 's', kEot}, x));
  config.packing = false;
  CHECK_THAT(open_dataset(config, kRequest).description,
             Catch::Contains("instruction data, one example per window; train 2 / val none "
                             "examples of up to 12 tokens, padded"));
  config.packing = true;

  // A mask with no example start (bit 1) cannot say where its examples are.
  std::string startless = raw;
  for (std::size_t i = 1024; i < startless.size(); ++i) {
    startless[i] = static_cast<char>(startless[i] & 1);
  }
  write_file(f.dir + "/sft_train.mask", startless);
  CHECK_THROWS_WITH(open_dataset(config, kRequest),
                    f.dir + "/sft_train.mask: no byte marks an example start (bit 1, value 2) "
                    "among its 15 bytes: a loss mask needs them to find its examples; write it "
                    "again with ampt tokenize");

  // A mask that does not match its shard is refused by name.
  write_file(f.dir + "/sft_train.mask", raw.substr(0, 8) + std::string("\x03\x00\x00\x00", 4) + raw.substr(12));
  CHECK_THROWS_WITH(open_dataset(config, kRequest),
                    f.dir + "/sft_train.mask: 3 mask bytes for the 15 tokens of " + out);
}

TEST_CASE("instruction data: no tokenizer, or a chat template for documents, is a usage error",
          "[data][text][chat][errors]") {
  const Fixture f;
  auto config = f.config();
  config.tokenizer.clear();
  CHECK_THROWS_AS(open_dataset(config, kRequest), ampt::UsageError);
  CHECK_THROWS_WITH(open_dataset(config, kRequest),
                    "jsonl:" + f.data + " holds instruction records, which need a tokenizer for "
                    "their chat template: name one with --tokenizer, or fine-tune with --init_from");
  write_file(f.data, R"({"text": "a document"})" "\n");
  config = f.config();
  config.chat_template = f.dir + "/t.json";
  CHECK_THROWS_WITH(open_dataset(config, kRequest),
                    "--chat_template renders instruction records (\"prompt\"/\"completion\" or "
                    "\"messages\"), but jsonl:" + f.data + " holds documents (field \"text\")");
}

TEST_CASE("instruction data: packed greedily in order, none split, each example counting its own "
          "positions, the data line saying how much is padding",
          "[data][text][chat][packing]") {
  const Fixture f;
  // Examples of 4, 4, 6 and 3 tokens (prompt, completion, <|endoftext|>): 3 + 3 + 5 positions
  // fill the first window of 12, the fourth's 2 do not fit beside them.
  write_file(f.data, R"({"prompt": "ab", "completion": "c"})" "\n"
                     R"({"prompt": "d", "completion": "ef"})" "\n"
                     R"({"prompt": "ghij", "completion": "k"})" "\n"
                     R"({"prompt": "l", "completion": "m"})" "\n");
  const auto splits = open_dataset(f.config(), kRequest);
  CHECK_THAT(splits.description,
             Catch::Contains("; instruction data, packed 4 examples into 2 windows of 12: 54% "
                             "scored or prompt tokens, 46% padding (unpacked: 73% padding), loss "
                             "on answers only; train 2 / val none windows of 12"));
  REQUIRE(splits.train->size() == 2);
  const auto batch = splits.train->gather({0, 1});
  CHECK(as_vector(batch.inputs) ==
        join({padded(join({bytes("abc"), bytes("def"), bytes("ghijk")}), kEot),
              padded(bytes("lm"), kEot)}));
  CHECK(as_vector(batch.targets) ==
        join({padded({x, 'c', kEot, 'e', 'f', kEot, x, x, x, 'k', kEot}, x),
              padded({'m', kEot}, x)}));
  // The tail counts from 0 as a run of its own.
  CHECK(as_vector(batch.positions) == std::vector<int64_t>{0, 1, 2, 0, 1, 2, 0, 1, 2, 3, 4, 0,
                                                           0, 1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  // The same cut as FlashAttention's cumulative lengths over the flattened batch.
  CHECK(as_vector(batch.starts) == std::vector<int64_t>{0, 3, 6, 11, 12, 14, 24});
}

TEST_CASE("instruction data: the validation split holds out examples before packing, the same "
          "examples packed or not",
          "[data][text][chat][packing]") {
  const Fixture f;
  // Twenty examples of one letter's prompt and answer each: which ones validation holds is read
  // back from the tokens of its batches.
  std::string records;
  for (char c = 'a'; c < 'a' + 20; ++c) {
    records += fmt::format(R"({{"prompt": "{}", "completion": "{}"}})", c, c) + "\n";
  }
  write_file(f.data, records);
  auto config = f.config();
  config.val_fraction = 0.25;
  const auto held_out_prompts = [&](bool packing) {
    config.packing = packing;
    const auto splits = open_dataset(config, kRequest);
    REQUIRE(splits.val != nullptr);
    std::vector<int64_t> all(static_cast<size_t>(splits.val->size()));
    std::iota(all.begin(), all.end(), int64_t{0});
    std::string prompts;
    for (const int64_t token : as_vector(splits.val->gather(all).inputs)) {
      if (token >= 'a' && token < 'a' + 20 && (prompts.empty() || prompts.back() != token)) {
        prompts += static_cast<char>(token);
      }
    }
    return std::pair{prompts, splits.val->size()};
  };
  const auto [unpacked, examples] = held_out_prompts(false);
  const auto [packed, windows] = held_out_prompts(true);
  CHECK(unpacked.size() == 5);  // a quarter of 20 examples, one window each
  CHECK(examples == 5);
  CHECK(packed == unpacked);
  CHECK(windows < examples);  // packed: the same five share windows
}
