// The Llama-3 and ChatML templates against transformers' apply_chat_template with Llama-3-Instruct's
// and Qwen2-Instruct's published Jinja templates, id for id, on Llama-3- and Qwen2-style
// tokenizer.json files trained in the test; the loss mask scores exactly the ids between an
// assistant turn's generation prompt and its end of turn.
#include "ampt/core/json_reader.h"
#include "ampt/text/tokenize_chats.h"
#include "ampt/text/tokenizer_files.h"
#include "support/process.h"
#include "support/skip.h"
#include "support/python_modules.h"

#include <catch2/catch.hpp>

#include <filesystem>

using namespace ampt::text;

namespace {

const std::string kChatScript = AMPT_SOURCE_DIR "/tests/text/chat_reference.py";

// Contents that start after the template's newline without whitespace of their own: a content
// starting with a newline is the one case where encoding it apart from the template differs.
const char* kChats = R"({"messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4."}]}
{"messages": [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "  Hello there!  "}, {"role": "assistant", "content": " Hi! How can I help? "}]}
{"messages": [{"role": "user", "content": "a b"}, {"role": "assistant", "content": "c"}, {"role": "user", "content": "Dates: 2024-11-24, 12345."}, {"role": "assistant", "content": "Noted\nwith lines\n\nand more."}]}
)";

std::vector<int32_t> id_list(const ampt::JsonValue& array) {
  std::vector<int32_t> out;
  for (const auto& item : array.items) out.push_back(static_cast<int32_t>(item.number));
  return out;
}

}  // namespace

TEST_CASE("chat data: Llama-3 and ChatML examples are transformers' apply_chat_template ids",
          "[text][chat][python]") {
  if (!ampt::test::python_has("transformers, tokenizers, jinja2")) {
    AMPT_SKIP(reference, "skipping: transformers missing in " AMPT_PYTHON " (run scripts/bootstrap.sh)");
  }
  const std::string dir = ampt::test::make_temp_dir();
  ampt::test::write_file(dir + "/chats.jsonl", kChats);
  const auto python = ampt::test::run_process({AMPT_PYTHON, kChatScript, dir});
  INFO(python.err);
  REQUIRE(python.exit_code == 0);
  const auto reference = ampt::parse_json(ampt::test::read_file(dir + "/reference.json"));

  for (const std::string name : {"llama3", "qwen2"}) {
    INFO(name);
    const auto tokenizer = load_tokenizer(dir + "/" + name);
    ChatTemplate chat = builtin_chat_template(tokenizer);
    CHECK(chat.name == (name == "llama3" ? "Llama-3" : "ChatML"));
    // Qwen2's template adds its system prompt to a chat without one; a template file says so.
    if (name == "qwen2") chat.default_system = "You are a helpful assistant.";
    std::vector<int32_t> ids;
    std::vector<uint8_t> mask;
    tokenize_chats(tokenizer, chat, {dir + "/chats.jsonl"}, {},
                   [&](std::span<const int32_t> i, std::span<const uint8_t> m) {
                     ids.insert(ids.end(), i.begin(), i.end());
                     mask.insert(mask.end(), m.begin(), m.end());
                   });
    std::size_t start = 0;
    for (const auto& expected : reference.find(name)->items) {
      const auto want = id_list(*expected.find("ids"));
      REQUIRE(start + want.size() <= ids.size());
      CHECK(std::vector<int32_t>(ids.begin() + start, ids.begin() + start + want.size()) == want);
      // Scored: from the end of each generation prompt to the end of turn (ChatML's "\n" after
      // <|im_end|> is not the model's to say).
      std::vector<uint8_t> want_mask(want.size(), 0);
      want_mask[0] = kExampleStart;
      for (const auto& turn : expected.find("turns")->items) {
        const auto from = static_cast<std::size_t>(turn.items[0].number);
        const auto to = static_cast<std::size_t>(turn.items[1].number) - (name == "qwen2" ? 1 : 0);
        for (std::size_t t = from; t < to; ++t) want_mask[t] |= kScoredToken;
      }
      CHECK(std::vector<uint8_t>(mask.begin() + start, mask.begin() + start + want.size()) == want_mask);
      start += want.size();
    }
    CHECK(start == ids.size());
  }
}
