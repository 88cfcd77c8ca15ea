// The prompts of online RL: a standard prompt is its text (BOS first where the tokenizer has one),
// a conversational one the chat template's rendering with the generation prompt after it, by
// hand for the built-in ChatML template and through Qwen3's published Jinja template; the record
// stays whole for the rewards; every bad record is one line naming its file, line and field.
#include "ampt/core/errors.h"
#include "ampt/text/chat_jinja.h"
#include "ampt/text/prompt_records.h"
#include "support/process.h"
#include "text/text_fixtures.h"

#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

using namespace ampt::text;
using ampt::test::make_temp_dir;
using ampt::test::write_file;

namespace {

// <|im_start|> 257, <|im_end|> 258.
const std::vector<std::string> kPromptSpecials = {"<|im_start|>", "<|im_end|>"};

std::vector<int32_t> byte_ids(const std::string& text) {
  std::vector<int32_t> ids;
  for (const char c : text) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

std::vector<int32_t> joined(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

}  // namespace

TEST_CASE("prompt records: a standard prompt is its text, BOS first where the tokenizer has one",
          "[text][prompts]") {
  const auto dir = make_temp_dir();
  const std::string path = dir + "/prompts.jsonl";
  write_file(path, "{\"prompt\": \"2+3=\", \"answer\": \"5\"}\n\n{\"prompt\": \"<|im_end|>\", \"answer\": 7}\n");
  // A tokenizer without a BOS: the text alone (GPT-2's and Qwen's tokenizers add nothing).
  const auto plain = read_prompt_records(ampt::test::byte_tokenizer(kPromptSpecials), builtin_chat_template(ampt::test::byte_tokenizer(kPromptSpecials)), {path});
  CHECK(plain.form == PromptForm::standard);
  CHECK_FALSE(plain.end_of_turn.has_value());  // a standard prompt's completion has no turn to end
  REQUIRE(plain.records.size() == 2);
  CHECK(plain.records[0].ids == byte_ids("2+3="));
  CHECK(plain.records[0].text == "2+3=");
  CHECK(plain.records[0].place == path + ": line 1");
  // The record is kept whole for the rewards, its own fields as written.
  REQUIRE(plain.records[0].record.find("answer") != nullptr);
  CHECK(plain.records[0].record.find("answer")->string == "5");
  CHECK(plain.records[1].place == path + ": line 3");
  // A special token's text inside a prompt stays text, as the instruction data encodes contents.
  CHECK(plain.records[1].ids == byte_ids("<|im_end|>"));
  // Llama's tokenizer adds its BOS (here <|im_start|>, 257, standing in for <|begin_of_text|>).
  const Tokenizer with_bos = ampt::test::byte_tokenizer(kPromptSpecials, 257);
  const auto bos = read_prompt_records(with_bos, builtin_chat_template(with_bos), {path});
  CHECK(bos.records[0].ids == joined({{257}, byte_ids("2+3=")}));
}

TEST_CASE("prompt records: a conversational prompt ends with the template's generation prompt",
          "[text][prompts]") {
  const auto dir = make_temp_dir();
  const std::string path = dir + "/chat.jsonl";
  write_file(path,
             "{\"prompt\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": "
             "\"2+3?\"}], \"solution\": \"5\"}\n");
  const Tokenizer tokenizer = ampt::test::byte_tokenizer(kPromptSpecials);
  SECTION("the built-in ChatML template, by hand") {
    const auto prompts = read_prompt_records(tokenizer, builtin_chat_template(tokenizer), {path});
    CHECK(prompts.form == PromptForm::conversational);
    REQUIRE(prompts.records.size() == 1);
    const auto& ids = prompts.records[0].ids;
    CHECK(ids == joined({{257}, byte_ids("system\nBe brief."), {258}, byte_ids("\n"), {257}, byte_ids("user\n2+3?"), {258},
                       byte_ids("\n"), {257}, byte_ids("assistant\n")}));
    CHECK(prompts.records[0].text ==
          "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+3?<|im_end|>\n<|im_start|>assistant\n");
    // The assistant's turn ends at <|im_end|>, whatever the tokenizer's EOS.
    CHECK(prompts.end_of_turn == std::optional<int32_t>(258));
  }
  SECTION("Qwen3's own Jinja template: apply_chat_template(add_generation_prompt=True)") {
    ChatTemplate chat;
    chat.name = "qwen3.jinja";
    chat.jinja = std::make_shared<const JinjaChat>(
        read_jinja_chat(AMPT_SOURCE_DIR "/tests/text/chat_templates/qwen3.jinja", tokenizer, ""));
    const auto prompts = read_prompt_records(tokenizer, chat, {path});
    REQUIRE(prompts.records.size() == 1);
    const std::string expected =
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+3?<|im_end|>\n<|im_start|>assistant\n";
    CHECK(prompts.records[0].text == expected);
    // Encoded whole, the template's special tokens as their ids.
    CHECK(prompts.records[0].ids == tokenizer.encode(expected, SpecialTokens::allowed));
    CHECK(prompts.records[0].ids.front() == 257);
    CHECK(prompts.end_of_turn == std::optional<int32_t>(258));
  }
  SECTION("the plain template: its suffix is the EOS, which ends a completion anyway") {
    const auto prompts = read_prompt_records(tokenizer, plain_chat_template(tokenizer), {path});
    CHECK(prompts.form == PromptForm::conversational);
    CHECK(prompts.end_of_turn == std::optional<int32_t>(tokenizer.eot_id()));
  }
  SECTION("a template that puts no special token after the content has no end of turn") {
    ChatTemplate chat = builtin_chat_template(tokenizer);
    chat.assistant.suffix = "\n\n";
    CHECK_FALSE(read_prompt_records(tokenizer, chat, {path}).end_of_turn.has_value());
  }
}

TEST_CASE("prompt records: a bad record is one line naming its file, line and field", "[text][prompts][errors]") {
  const auto dir = make_temp_dir();
  const Tokenizer tokenizer = ampt::test::byte_tokenizer(kPromptSpecials);
  const ChatTemplate chat = builtin_chat_template(tokenizer);
  const auto fails = [&](const std::string& contents, const std::string& message) {
    const std::string path = dir + "/bad.jsonl";
    write_file(path, contents);
    CHECK_THROWS_WITH(read_prompt_records(tokenizer, chat, {path}), path + message);
  };
  fails("{\"question\": \"2+3?\", \"answer\": \"5\"}\n",
        ": line 1: no \"prompt\" (the record has question, answer): a prompt record's \"prompt\" is a string or a "
        "list of {\"role\", \"content\"} objects");
  fails("[1, 2]\n", ": line 1: an array: a prompt record is an object with a \"prompt\"");
  fails("{\"prompt\": 3}\n",
        ": line 1: \"prompt\" is a number: expected a string or a list of {\"role\", \"content\"} objects");
  fails("{\"prompt\": []}\n", ": line 1: \"prompt\" is empty: expected a list of {\"role\", \"content\"} objects");
  fails("{\"prompt\": \"a\"}\n{\"prompt\": [{\"role\": \"user\", \"content\": \"b\"}]}\n",
        ": line 2: the prompt is conversational (a list of messages), and the first record's was standard (a "
        "string): a prompt file holds one form");
  fails("{\"prompt\": [{\"role\": \"robot\", \"content\": \"b\"}]}\n",
        ": line 1: prompt[0]: unknown role \"robot\": expected system, user or assistant");
  fails("{\"prompt\": \"\"}\n", ": line 1: the prompt has no tokens: a completion needs a prompt to follow");
  const std::string broken = dir + "/broken.jsonl";
  write_file(broken, "{\"prompt\": \"a\"\n");
  CHECK_THROWS_WITH(read_prompt_records(tokenizer, chat, {broken}),
                    Catch::Matchers::StartsWith(broken + ": line 1: invalid JSON: "));
  fails("\n\n", ": no prompt records (JSON Lines or a table, each record with a \"prompt\")");
}
