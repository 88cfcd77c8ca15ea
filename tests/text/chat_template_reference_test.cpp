// Published chat templates (tests/text/chat_templates/: Llama-3.1 and 3.2, Qwen2.5, Qwen3 with
// reasoning on and off, Mistral v0.3, Gemma-2, Phi-3.5, DeepSeek-R1-Distill-Qwen) rendered by the
// tokenizer's own template against transformers' apply_chat_template, id for id and scored token
// for scored token (tests/text/chat_template_reference.py: one Python process for every case, on
// BPEs trained there with each template's special tokens). Chats hold several turns, tool calls
// and results, reasoning, Unicode, and contents starting and ending with whitespace; a template's
// refusal (Gemma's of a system turn) is an error on both sides.
#include "ampt/core/errors.h"
#include "ampt/core/json_reader.h"
#include "ampt/text/tokenize_chats.h"
#include "ampt/text/tokenizer_files.h"
#include "support/process.h"
#include "support/python_modules.h"
#include "support/skip.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace ampt::text;

namespace {

const std::string kScript = AMPT_SOURCE_DIR "/tests/text/chat_template_reference.py";

const char* kTurns = R"({"messages": [{"role": "system", "content": "You are terse. ✓"}, {"role": "user", "content": "  What is 2+2?\n"}, {"role": "assistant", "content": " 4, naïvely. "}, {"role": "user", "content": "Und jetzt: 3+3?"}, {"role": "assistant", "content": "6.\n\nDone."}]})";
const char* kPlainTurns = R"({"messages": [{"role": "user", "content": "Hi there  "}, {"role": "assistant", "content": "  Hello! 👋"}, {"role": "user", "content": "Zwei\nZeilen"}, {"role": "assistant", "content": "Gut."}]})";
const char* kTools = R"({"messages": [{"role": "user", "content": "Weather in Zürich?"}, {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich", "unit": "c"}}}]}, {"role": "tool", "content": "{\"temp\": 21}"}, {"role": "assistant", "content": "It is 21 °C."}], "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Current weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}}]})";
const char* kMistralTools = R"({"messages": [{"role": "user", "content": "Weather in Zürich?"}, {"role": "assistant", "tool_calls": [{"id": "call12345", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich"}}}]}, {"role": "tool", "tool_call_id": "call12345", "content": "{\"temp\": 21}"}, {"role": "assistant", "content": "It is 21 °C."}], "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Current weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]})";
const char* kReasoning = R"({"messages": [{"role": "user", "content": "Think: 17*3?"}, {"role": "assistant", "content": "51", "reasoning_content": "17*3 = 51."}, {"role": "user", "content": "And 18*3?"}, {"role": "assistant", "content": "<think>\n18*3 is 54.\n</think>\n\n54"}]})";

const char* kGenerationTemplate =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{% if message['role'] == 'assistant' %}{% generation %}{{ message['content'] + '<|im_end|>' }}"
    "{% endgeneration %}{{ '\\n' }}{% else %}{{ message['content'] + '<|im_end|>\\n' }}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

struct TemplateCase {
  std::string name, style, templ, kwargs;
  std::vector<std::string> chats;
};

const std::string kDate = R"({"date_string": "26 Jul 2024"})";

const std::vector<TemplateCase> kTemplateCases = {
    {"llama31", "llama-3.1-8b-instruct", "llama-3.1-8b-instruct.jinja", kDate, {kTurns, kTools}},
    {"llama32", "llama-3.2-1b-instruct", "llama-3.2-1b-instruct.jinja", kDate, {kTurns, kTools}},
    {"qwen25", "qwen2.5-instruct", "qwen2.5-instruct.jinja", "", {kTurns, kTools, kPlainTurns}},
    {"qwen3", "qwen3", "qwen3.jinja", "", {kTurns, kTools, kReasoning}},
    {"qwen3_nothink", "qwen3", "qwen3.jinja", R"({"enable_thinking": false})", {kTurns, kReasoning}},
    {"mistral", "mistral-7b-instruct-v0.3", "mistral-7b-instruct-v0.3.jinja", "", {kTurns, kMistralTools, kPlainTurns}},
    {"gemma2", "gemma-2-it", "gemma-2-it.jinja", "", {kPlainTurns, kTurns}},
    {"phi35", "phi-3.5-mini-instruct", "phi-3.5-mini-instruct.jinja", "", {kTurns, kReasoning}},
    {"deepseek", "deepseek-r1-distill-qwen", "deepseek-r1-distill-qwen.jinja", "", {kTurns, kReasoning}},
    {"generation", "chatml-generation", kGenerationTemplate, "", {kTurns, kPlainTurns}},
};

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

}  // namespace

TEST_CASE("chat templates: a tokenizer's own Jinja template gives apply_chat_template's ids and "
          "assistant tokens",
          "[text][chat][jinja][python]") {
  if (!ampt::test::python_has("transformers, tokenizers, jinja2")) {
    AMPT_SKIP(reference, "skipping: transformers missing in " AMPT_PYTHON " (run scripts/bootstrap.sh)");
  }
  const std::string dir = ampt::test::make_temp_dir();
  std::string cases = "[";
  for (std::size_t c = 0; c < kTemplateCases.size(); ++c) {
    const TemplateCase& k = kTemplateCases[c];
    cases += (c > 0 ? ",\n" : "") + fmt::format(R"({{"name": "{}", "style": "{}", "template": {}, "kwargs": {}, "chats": [{}]}})",
                                                 k.name, k.style, quoted(k.templ), k.kwargs.empty() ? "{}" : k.kwargs,
                                                 fmt::join(k.chats, ", "));
  }
  ampt::test::write_file(dir + "/cases.json", cases + "]");
  const auto python = ampt::test::run_process({AMPT_PYTHON, kScript, dir});
  INFO(python.err);
  REQUIRE(python.exit_code == 0);
  const auto reference = ampt::parse_json(ampt::test::read_file(dir + "/reference.json"));
  REQUIRE(reference.items.size() == kTemplateCases.size());

  for (std::size_t c = 0; c < kTemplateCases.size(); ++c) {
    const TemplateCase& k = kTemplateCases[c];
    INFO("template " << k.name);
    const auto tokenizer = load_tokenizer(dir + "/" + k.name);
    for (std::size_t r = 0; r < k.chats.size(); ++r) {
      INFO("chat " << r << ": " << k.chats[r]);
      const std::string file = fmt::format("{}/{}-{}.jsonl", dir, k.name, r);
      ampt::test::write_file(file, k.chats[r] + "\n");
      const ChatTemplate chat = records_template({file}, InputFormat::records, tokenizer, "", file, k.kwargs);
      REQUIRE(chat.jinja != nullptr);
      CHECK(chat.name == dir + "/" + k.name + "/tokenizer_config.json chat_template");
      std::vector<int32_t> ids;
      std::vector<uint8_t> mask;
      const auto run = [&] {
        tokenize_chats(tokenizer, chat, {file}, {}, [&](std::span<const int32_t> i, std::span<const uint8_t> m) {
          ids.insert(ids.end(), i.begin(), i.end());
          mask.insert(mask.end(), m.begin(), m.end());
        });
      };
      const auto& want = reference.items[c].items[r];
      // Gemma-2's template refuses a system turn; every other chat renders.
      CHECK((want.find("error") != nullptr) == (k.name == "gemma2" && r == 1));
      if (const auto* error = want.find("error")) {
        INFO("transformers: " << error->string);
        CHECK_THROWS_AS(run(), ampt::RuntimeError);
        continue;
      }
      run();
      std::vector<int32_t> want_ids;
      std::vector<uint8_t> want_mask;
      for (const auto& id : want.find("ids")->items) want_ids.push_back(static_cast<int32_t>(id.number));
      for (const auto& s : want.find("scored")->items) want_mask.push_back(s.number != 0 ? kScoredToken : 0);
      if (!want_mask.empty()) want_mask[0] |= kExampleStart;
      CHECK(ids == want_ids);
      CHECK(mask == want_mask);
      CHECK(std::ranges::count(want_mask, kScoredToken) > 0);
    }
  }
}
