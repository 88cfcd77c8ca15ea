// Records of every common shape through a model's own Jinja template (published templates read
// from tests/text/chat_templates/, no Python): ShareGPT, Alpaca and prompt/completion records
// give the ids and mask of the messages they stand for; bad records, bad templates and a
// template's refusal are one-line errors naming the file, the line and the field.
#include "ampt/core/errors.h"
#include "ampt/text/chat_jinja.h"
#include "ampt/text/tokenize_chats.h"
#include "support/process.h"
#include "text/text_fixtures.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace ampt::text;

namespace {

const std::string kTemplates = AMPT_SOURCE_DIR "/tests/text/chat_templates/";

// The 256 bytes, <|endoftext|>, then `specials`.
Tokenizer specials_tokenizer(const std::vector<std::string>& specials) {
  Vocabulary v = ampt::test::toy_vocabulary({});
  for (const std::string& special : specials) {
    v.special_ids.push_back(static_cast<int32_t>(v.tokens.size()));
    v.tokens.push_back(special);
  }
  return Tokenizer(std::move(v));
}

const std::vector<std::string> kQwenSpecials = {"<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>",
                                                "<tool_response>", "</tool_response>"};

ChatTemplate jinja_template(const std::string& file, const Tokenizer& tokenizer, const std::string& kwargs = "") {
  ChatTemplate chat;
  chat.name = file;
  chat.jinja = std::make_shared<const JinjaChat>(read_jinja_chat(kTemplates + file, tokenizer, kwargs));
  return chat;
}

struct Tokens {
  std::vector<int32_t> ids;
  std::vector<uint8_t> mask;
};

Tokens tokenize(const Tokenizer& tokenizer, const ChatTemplate& chat, const std::string& records) {
  const std::string path = ampt::test::make_temp_dir() + "/chat.jsonl";
  ampt::test::write_file(path, records);
  Tokens out;
  tokenize_chats(tokenizer, chat, {path}, {}, [&](std::span<const int32_t> i, std::span<const uint8_t> m) {
    out.ids.insert(out.ids.end(), i.begin(), i.end());
    out.mask.insert(out.mask.end(), m.begin(), m.end());
  });
  return out;
}

// The error of tokenizing `records`, less the file's path.
std::string error_of(const Tokenizer& tokenizer, const ChatTemplate& chat, const std::string& records) {
  try {
    tokenize(tokenizer, chat, records);
  } catch (const ampt::RuntimeError& e) {
    const std::string what = e.what();
    return what.substr(what.find("chat.jsonl: ") + 12);
  }
  return "no error";
}

}  // namespace

TEST_CASE("chat templates: ShareGPT, Alpaca and prompt/completion records render as their messages",
          "[text][chat][jinja]") {
  const auto tokenizer = specials_tokenizer(kQwenSpecials);
  const ChatTemplate qwen = jinja_template("qwen2.5-instruct.jinja", tokenizer);
  const std::string tools =
      R"([{"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}])";
  const auto sharegpt = tokenize(tokenizer, qwen, R"({"system": "Be exact.", "tools": )" + jinja::to_json(jinja::Value::string(tools)) +
                                                       R"(, "conversations": [{"from": "human", "value": "1+2?"}, {"from": "function_call", "value": "{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}"}, {"from": "observation", "value": "3"}, {"from": "gpt", "value": "It is 3."}]})"
                                                       "\n");
  const auto messages = tokenize(tokenizer, qwen, R"({"messages": [{"role": "system", "content": "Be exact."}, {"role": "user", "content": "1+2?"}, {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "add", "arguments": {"a": 1, "b": 2}}}]}, {"role": "tool", "content": "3"}, {"role": "assistant", "content": "It is 3."}], "tools": )" +
                                                      tools + "}\n");
  CHECK(sharegpt.ids == messages.ids);
  CHECK(sharegpt.mask == messages.mask);
  CHECK(std::ranges::count_if(messages.mask, [](uint8_t m) { return (m & kScoredToken) != 0; }) > 0);
  CHECK(tokenizer.decode(messages.ids).find("<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>") !=
        std::string::npos);

  const auto alpaca = tokenize(tokenizer, qwen, R"({"system": "S", "instruction": "Sum these.", "input": "2 3", "output": "5"})" "\n");
  const auto alpaca_messages = tokenize(tokenizer, qwen, R"({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "Sum these.\n2 3"}, {"role": "assistant", "content": "5"}]})" "\n");
  CHECK(alpaca.ids == alpaca_messages.ids);
  CHECK(alpaca.mask == alpaca_messages.mask);

  const auto completion = tokenize(tokenizer, qwen, R"({"prompt": "Hi", "completion": " there"})" "\n");
  const auto completion_messages = tokenize(tokenizer, qwen, R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": " there"}]})" "\n");
  CHECK(completion.ids == completion_messages.ids);
  CHECK(completion.mask == completion_messages.mask);
  // Qwen2.5's default system prompt, and the scored turn with its end of turn but not the "\n".
  CHECK(tokenizer.decode(completion.ids) ==
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n there<|im_end|>\n");
  std::vector<int32_t> scored;
  for (std::size_t t = 0; t < completion.ids.size(); ++t) {
    if ((completion.mask[t] & kScoredToken) != 0) scored.push_back(completion.ids[t]);
  }
  CHECK(tokenizer.decode(scored) == " there<|im_end|>");

  // Reasoning under any of transformers' names reaches the template as reasoning_content.
  const ChatTemplate qwen3 = jinja_template("qwen3.jinja", specials_tokenizer({"<|im_start|>", "<|im_end|>"}));
  const auto qwen3_tokenizer = specials_tokenizer({"<|im_start|>", "<|im_end|>"});
  const auto reasoning = tokenize(qwen3_tokenizer, qwen3, R"({"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A", "reasoning": "R"}]})" "\n");
  CHECK(qwen3_tokenizer.decode(reasoning.ids) ==
        "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nR\n</think>\n\nA<|im_end|>\n");
}

TEST_CASE("chat templates: bad records, templates and kwargs are one-line errors", "[text][chat][jinja][errors]") {
  const auto tokenizer = specials_tokenizer(kQwenSpecials);
  const ChatTemplate qwen = jinja_template("qwen2.5-instruct.jinja", tokenizer);
  const std::string ok = R"({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]})" "\n";
  CHECK(error_of(tokenizer, qwen, R"({"conversations": [{"from": "human", "value": "a"}, {"from": "bot", "value": "b"}]})" "\n") ==
        "line 1: conversations[1]: \"from\" is \"bot\": expected human, gpt, system, function_call or observation");
  CHECK(error_of(tokenizer, qwen, R"({"conversations": [{"from": "function_call", "value": "not json"}]})" "\n")
            .starts_with("line 1: conversations[0]: a function_call \"value\" is not JSON: "));
  CHECK(error_of(tokenizer, qwen, ok.substr(0, ok.size() - 2) + R"(, "tools": {"name": "add"}})" "\n") ==
        "line 1: \"tools\" is an object: expected a list of tool schemas ({\"type\": \"function\", "
        "\"function\": {...}})");
  CHECK(error_of(tokenizer, qwen, ok.substr(0, ok.size() - 2) + R"(, "tools": ["add"]})" "\n") ==
        "line 1: \"tools\"[0] is a string: expected tool schemas ({\"type\": \"function\", \"function\": {...}})");
  CHECK(error_of(tokenizer, qwen, R"({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "tool_calls": {"name": "x"}}]})" "\n") ==
        "line 1: messages[1]: \"tool_calls\" is an object: expected a list of {\"type\", \"function\"} objects");
  CHECK(error_of(tokenizer, qwen, R"({"messages": [{"role": "user", "content": "a"}, {"role": "bot", "content": "x"}, {"role": "assistant", "content": "b"}]})" "\n") ==
        "line 1: messages[1]: " + kTemplates + "qwen2.5-instruct.jinja renders nothing for the role \"bot\": a role this template does not know");
  CHECK(error_of(tokenizer, qwen, ok + R"({"instruction": "a", "output": "b"})" "\n") ==
        "line 2: a record of Alpaca \"instruction\"/\"output\": the data holds \"messages\" records, as its first record says");
  CHECK(error_of(tokenizer, qwen, R"({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": 3}]})" "\n") ==
        "line 1: messages[1]: \"content\" is a number: expected a string or a list of content parts");

  const auto gemma_tokenizer = specials_tokenizer({"<start_of_turn>", "<end_of_turn>"});
  const ChatTemplate gemma = jinja_template("gemma-2-it.jinja", gemma_tokenizer);
  CHECK(error_of(gemma_tokenizer, gemma, R"({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]})" "\n") ==
        "line 1: " + kTemplates + "gemma-2-it.jinja: line 1: the template refuses: System role not supported");

  const std::string dir = ampt::test::make_temp_dir();
  ampt::test::write_file(dir + "/bad.jinja", "{% for m in messages %}\n{% include 'turn.jinja' %}{% endfor %}");
  CHECK_THROWS_WITH(read_jinja_chat(dir + "/bad.jinja", tokenizer, ""),
                    dir + "/bad.jinja: line 2: {% include %} is not supported in a chat template");
  CHECK_THROWS_WITH(read_jinja_chat(kTemplates + "qwen3.jinja", tokenizer, "[1]"),
                    "--chat_template_kwargs '[1]' is an array: expected a JSON object such as '{\"enable_thinking\": false}'");
  CHECK_THROWS_WITH(records_template({dir + "/none.jsonl"}, InputFormat::records, tokenizer, "", "jsonl:none",
                                     R"({"enable_thinking": false})"),
                    Catch::Contains("--chat_template_kwargs '{\"enable_thinking\": false}' are passed to a Jinja chat "
                                    "template"));
}
