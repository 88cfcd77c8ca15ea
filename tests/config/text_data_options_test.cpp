// The options of text data (--tokenizer, --text_field, --packing, --max_length, --token_cache,
// --chat_template, --train_on_prompt): defaults, every source, and bad values.
#include <catch2/catch.hpp>

#include "config_test_support.h"

using namespace ampt::config;
using namespace ampt::config::testing;

TEST_CASE("text data options: defaults, YAML data section, env and flags", "[config][text]") {
  const Config defaults;
  CHECK(defaults.tokenizer.empty());
  CHECK(defaults.text_field == "text");
  CHECK(defaults.packing);
  CHECK(defaults.max_length == 0);
  CHECK(defaults.token_cache.empty());

  const TempYaml yaml(
      "data:\n  dataset: jsonl:d.jsonl\n  tokenizer: gpt2/\n  text_field: body\n  packing: false\n"
      "  max_length: 512\n  token_cache: /tmp/tok\n");
  const auto from_yaml = resolve_yaml(yaml);
  const Config& c = from_yaml.config();
  CHECK(c.dataset == "jsonl:d.jsonl");
  CHECK(c.tokenizer == "gpt2/");
  CHECK(c.text_field == "body");
  CHECK_FALSE(c.packing);
  CHECK(c.max_length == 512);
  CHECK(c.token_cache == "/tmp/tok");
  CHECK(describe(from_yaml.source_of("max_length")) == yaml.at(6));

  const auto overridden = resolve_yaml(yaml, {"--packing", "--max_length", "64"},
                                       {{"AMPT_TEXT_FIELD", "content"}, {"AMPT_TOKENIZER", "t.json"}});
  CHECK(overridden.config().packing);
  CHECK(overridden.config().max_length == 64);
  CHECK(overridden.config().text_field == "content");
  CHECK(overridden.config().tokenizer == "t.json");
  CHECK(describe(overridden.source_of("text_field")) == "env AMPT_TEXT_FIELD");
}

TEST_CASE("instruction data options: --chat_template and --train_on_prompt from every source",
          "[config][text][chat]") {
  const Config defaults;
  CHECK(defaults.chat_template.empty());
  CHECK_FALSE(defaults.train_on_prompt);
  const TempYaml yaml("data:\n  chat_template: chatml.json\n  train_on_prompt: true\n");
  const auto from_yaml = resolve_yaml(yaml);
  CHECK(from_yaml.config().chat_template == "chatml.json");
  CHECK(from_yaml.config().train_on_prompt);
  const auto overridden = resolve_yaml(yaml, {"--train_on_prompt=false"},
                                       {{"AMPT_CHAT_TEMPLATE", "zephyr.json"}});
  CHECK(overridden.config().chat_template == "zephyr.json");
  CHECK_FALSE(overridden.config().train_on_prompt);
  CHECK(describe(overridden.source_of("chat_template")) == "env AMPT_CHAT_TEMPLATE");
  CHECK(resolve_error({"--train_on_prompt=maybe"}) ==
        "invalid value 'maybe' for train_on_prompt (flag --train_on_prompt): expected a boolean "
        "(true/false, yes/no, on/off, 1/0)");
}

TEST_CASE("text data options: bad values are one-line usage errors", "[config][text][errors]") {
  CHECK(resolve_error({"--text_field", ""}) ==
        "invalid value '' for text_field (flag --text_field): expected a non-empty string");
  CHECK(resolve_error({"--packing=perhaps"}) ==
        "invalid value 'perhaps' for packing (flag --packing): expected a boolean (true/false, "
        "yes/no, on/off, 1/0)");
  CHECK(resolve_error({"--max_length", "-8"}) ==
        "invalid value '-8' for max_length (flag --max_length): expected an integer >= 0");
  CHECK(resolve_error({"--max_length", "lots"}) ==
        "invalid value 'lots' for max_length (flag --max_length): expected an integer >= 0");
  CHECK(yaml_error("data: {max_length: -3}\n") ==
        "invalid value '-3' for max_length (FILE:1): expected an integer >= 0");
}

TEST_CASE("instruction data options: --chat_template_kwargs takes a JSON object from every source",
          "[config][text][chat]") {
  CHECK(Config{}.chat_template_kwargs.empty());
  const TempYaml yaml("data:\n  chat_template_kwargs: '{\"enable_thinking\": false}'\n");
  CHECK(resolve_yaml(yaml).config().chat_template_kwargs == R"({"enable_thinking": false})");
  const auto overridden = resolve_yaml(yaml, {"--chat_template_kwargs", R"({"date_string": "26 Jul 2024"})"}, {});
  CHECK(overridden.config().chat_template_kwargs == R"({"date_string": "26 Jul 2024"})");
  CHECK(resolve_error({"--chat_template_kwargs", "enable_thinking=false"}) ==
        "invalid value 'enable_thinking=false' for chat_template_kwargs (flag --chat_template_kwargs): "
        "expected a JSON object such as '{\"enable_thinking\": false}'");
  CHECK(resolve_error({"--chat_template_kwargs", "[1]"}) ==
        "invalid value '[1]' for chat_template_kwargs (flag --chat_template_kwargs): expected a JSON "
        "object such as '{\"enable_thinking\": false}'");
}
