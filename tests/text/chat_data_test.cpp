// Instruction records: the ids and loss mask of an example checked against masks worked out by
// hand (plain, ChatML and Llama-3 templates, chosen by the tokenizer's special tokens), multi-turn
// messages, the template file, and every bad record's one-line error.
#include "ampt/core/errors.h"
#include "ampt/text/tokenize_chats.h"
#include "support/process.h"
#include "text/text_fixtures.h"

#include <catch2/catch.hpp>

using namespace ampt::text;
using ampt::test::make_temp_dir;
using ampt::test::write_file;

namespace {

const std::vector<std::string> kChatMl = {"<|im_start|>", "<|im_end|>"};
// <|begin_of_text|> 257, <|start_header_id|> 258, <|end_header_id|> 259, <|eot_id|> 260.
const std::vector<std::string> kLlama3 = {"<|begin_of_text|>", "<|start_header_id|>",
                                          "<|end_header_id|>", "<|eot_id|>"};

// An example written by hand: runs of ids, each scored or not.
struct Expected {
  std::vector<int32_t> ids;
  std::vector<uint8_t> mask;
  Expected& text(const std::string& bytes, bool scored = false) {
    for (const char c : bytes) add(static_cast<unsigned char>(c), scored);
    return *this;
  }
  Expected& add(int32_t id, bool scored = false) {
    mask.push_back((scored ? kScoredToken : 0) | (ids.empty() ? kExampleStart : 0));
    ids.push_back(id);
    return *this;
  }
};

void check_example(const Tokenizer& tokenizer, const ChatTemplate& chat, const std::vector<Turn>& turns,
                   const Expected& expected) {
  std::vector<int32_t> ids;
  std::vector<uint8_t> mask;
  encode_chat(tokenizer, chat, turns, ids, mask);
  CHECK(ids == expected.ids);
  CHECK(mask == expected.mask);
}

const std::vector<Turn> kPromptCompletion = {{Role::user, "Hi?"}, {Role::assistant, " Yes"}};

}  // namespace

TEST_CASE("chat data: a prompt/completion record scores its completion only, masks by hand",
          "[text][chat]") {
  SECTION("plain (GPT-2): prompt, completion, <|endoftext|>") {
    const auto tokenizer = ampt::test::byte_tokenizer();
    const auto chat = builtin_chat_template(tokenizer);
    CHECK(chat.name == "plain");
    check_example(tokenizer, chat, kPromptCompletion,
                  Expected().text("Hi?").text(" Yes", true).add(256, true));
  }
  SECTION("a plain template puts the tokenizer's BOS first") {
    const auto tokenizer = ampt::test::byte_tokenizer({"<s>"}, 257);
    check_example(tokenizer, builtin_chat_template(tokenizer), kPromptCompletion,
                  Expected().add(257).text("Hi?").text(" Yes", true).add(256, true));
  }
  SECTION("ChatML (Qwen2): <|im_start|>role\\ncontent<|im_end|>\\n, no default system turn") {
    const auto tokenizer = ampt::test::byte_tokenizer(kChatMl);
    const auto chat = builtin_chat_template(tokenizer);
    CHECK(chat.name == "ChatML");
    check_example(tokenizer, chat, kPromptCompletion,
                  Expected()
                      .add(257).text("user\nHi?").add(258).text("\n")
                      .add(257).text("assistant\n").text(" Yes", true).add(258, true).text("\n"));
  }
  SECTION("Llama-3: BOS, header tokens, trimmed contents, <|eot_id|>") {
    const auto tokenizer = ampt::test::byte_tokenizer(kLlama3, 257);
    const auto chat = builtin_chat_template(tokenizer);
    CHECK(chat.name == "Llama-3");
    check_example(tokenizer, chat, kPromptCompletion,
                  Expected()
                      .add(257)
                      .add(258).text("user").add(259).text("\n\nHi?").add(260)
                      .add(258).text("assistant").add(259).text("\n\n").text("Yes", true).add(260, true));
  }
}

TEST_CASE("chat data: multi-turn messages score the assistant turns only", "[text][chat]") {
  const auto tokenizer = ampt::test::byte_tokenizer(kChatMl);
  const std::vector<Turn> turns = {{Role::system, "S"}, {Role::user, "a"}, {Role::assistant, "b"},
                                   {Role::user, "c"}, {Role::assistant, "d<|im_end|>"}};
  // A special token's text inside a content stays text.
  check_example(tokenizer, builtin_chat_template(tokenizer), turns,
                Expected()
                    .add(257).text("system\nS").add(258).text("\n")
                    .add(257).text("user\na").add(258).text("\n")
                    .add(257).text("assistant\n").text("b", true).add(258, true).text("\n")
                    .add(257).text("user\nc").add(258).text("\n")
                    .add(257).text("assistant\n").text("d<|im_end|>", true).add(258, true).text("\n"));
}

TEST_CASE("chat data: a --chat_template file, its default system turn, and its errors",
          "[text][chat]") {
  const auto dir = make_temp_dir();
  write_file(dir + "/t.json", R"({"begin": "<s>", "system": {"prefix": "S:"},
    "user": {"prefix": "U:", "suffix": ";"}, "assistant": {"prefix": "A:", "suffix": "<|endoftext|>"},
    "separator": "|", "default_system": "be brief", "trim": true})");
  const auto chat = read_chat_template(dir + "/t.json");
  CHECK(chat.name == dir + "/t.json");
  const auto tokenizer = ampt::test::byte_tokenizer({"<s>"});
  check_example(tokenizer, chat, {{Role::user, " hi "}, {Role::assistant, "ok"}},
                Expected()
                    .add(257).text("S:be brief|U:hi;|A:").text("ok", true).add(256, true).text("|"));
  CHECK(chat.fingerprint() != builtin_chat_template(tokenizer).fingerprint());

  const auto error = [&](const std::string& json, const std::string& message) {
    write_file(dir + "/bad.json", json);
    CHECK_THROWS_WITH(read_chat_template(dir + "/bad.json"), dir + "/bad.json: " + message);
  };
  error(R"({"assistent": {}})",
        "\"assistent\": unknown key: expected begin, system, user, assistant, separator, default_system or trim");
  error(R"({"user": {"prefix": 1}})", "\"user\".\"prefix\" is a number: expected a string");
  error(R"({"user": {"before": ""}})", "\"user\".\"before\": unknown key: expected prefix or suffix");
  error(R"({"user": "U:"})", "\"user\" is a string: expected an object with \"prefix\" and \"suffix\"");
  error(R"({"trim": "yes"})", "\"trim\" is a string: expected true or false");
}

TEST_CASE("chat data: which records are instruction records", "[text][chat]") {
  const auto dir = make_temp_dir();
  const auto first_is = [&](const std::string& line, const std::string& field = "text") {
    write_file(dir + "/a.jsonl", "\n" + line + "\n");
    return holds_chat_records({dir + "/a.jsonl"}, InputFormat::by_extension, field);
  };
  CHECK(first_is(R"({"prompt": "a", "completion": "b"})"));
  CHECK(first_is(R"({"messages": []})"));
  CHECK_FALSE(first_is(R"({"text": "a"})"));
  // --text_field completion reads such records as documents, as before.
  CHECK_FALSE(first_is(R"({"prompt": "a", "completion": "b"})", "completion"));
  write_file(dir + "/a.txt", R"({"prompt": "a", "completion": "b"})");
  CHECK_FALSE(holds_chat_records({dir + "/a.txt"}, InputFormat::by_extension, "text"));
}

TEST_CASE("chat data: a bad record is one line naming its file, line and field", "[text][chat][errors]") {
  const auto dir = make_temp_dir();
  const auto tokenizer = ampt::test::byte_tokenizer(kChatMl);
  const auto chat = builtin_chat_template(tokenizer);
  const std::string path = dir + "/chat.jsonl";
  const auto error = [&](const std::string& record, const std::string& message) {
    INFO(record);
    write_file(path, "{\"prompt\": \"a\", \"completion\": \"b\"}\n\n" + record + "\n");
    CHECK_THROWS_WITH(tokenize_chats(tokenizer, chat, {path}, {}, [](auto, auto) {}),
                      path + ": line 3: " + message);
  };
  error(R"({"prompt": "a"})", "no \"completion\": expected a string");
  error(R"({"completion": "a"})", "no \"prompt\": expected a string");
  error(R"({"prompt": 1, "completion": "b"})", "\"prompt\" is a number: expected a string");
  error(R"({"text": "a"})",
        "no \"prompt\" and \"completion\" strings and no \"messages\" list (an instruction record "
        "has one or the other)");
  error(R"(["a"])",
        "an array: expected an object with \"prompt\" and \"completion\" or \"messages\"");
  error(R"({"messages": "hi"})",
        "\"messages\" is a string: expected a list of {\"role\", \"content\"} objects");
  error(R"({"messages": []})", "\"messages\" is empty: expected a list of {\"role\", \"content\"} objects");
  error(R"({"messages": ["hi"]})",
        "messages[0]: a string: expected an object with \"role\" and \"content\"");
  error(R"({"messages": [{"role": "user", "content": "a"}, {"role": "bot", "content": "b"}]})",
        "messages[1]: role \"bot\" needs the model's own chat template: the built-in ones render "
        "system, user and assistant (give the tokenizer a chat_template, or pass --chat_template "
        "FILE.jinja)");
  error(R"({"messages": [{"content": "a"}]})", "messages[0]: no \"role\": expected a string");
  error(R"({"messages": [{"role": "user", "content": null}]})",
        "messages[0]: no \"content\": expected a string (or \"tool_calls\" on an assistant turn)");
  error(R"({"messages": [{"role": "system", "content": "a"}, {"role": "user", "content": "b"}]})",
        "\"messages\" has no assistant turn: nothing to learn from");
  write_file(path, "{\"prompt\": ");
  CHECK_THROWS_WITH(tokenize_chats(tokenizer, chat, {path}, {}, [](auto, auto) {}),
                    Catch::StartsWith(path + ": line 1: invalid JSON: "));

  write_file(dir + "/a.txt", "text");
  CHECK_THROWS_WITH(tokenize_chats(tokenizer, chat, {dir + "/a.txt"}, {}, [](auto, auto) {}),
                    dir + "/a.txt: not a record file: instruction records (prompt/completion or "
                          "messages) are read from JSON Lines (.jsonl), Parquet and Arrow files");
}

TEST_CASE("chat data: tokenize_chats gives encode_chat's ids, in batches across threads", "[text][chat]") {
  const auto dir = make_temp_dir();
  const auto tokenizer = ampt::test::byte_tokenizer(kChatMl);
  const auto chat = builtin_chat_template(tokenizer);
  std::string file;
  std::vector<int32_t> want_ids;
  std::vector<uint8_t> want_mask;
  for (int i = 0; i < 200; ++i) {
    const std::string prompt = "question " + std::to_string(i);
    const std::string answer = std::string(static_cast<std::size_t>(i % 7), 'x') + "!";
    file += R"({"prompt": ")" + prompt + R"(", "completion": ")" + answer + "\"}\n";
    encode_chat(tokenizer, chat, {{Role::user, prompt}, {Role::assistant, answer}}, want_ids, want_mask);
  }
  write_file(dir + "/c.jsonl", file);
  std::vector<int32_t> ids;
  std::vector<uint8_t> mask;
  TokenizeFilesOptions options;
  options.threads = 3;
  const auto stats = tokenize_chats(tokenizer, chat, {dir + "/c.jsonl"}, options,
                                    [&](std::span<const int32_t> i, std::span<const uint8_t> m) {
                                      ids.insert(ids.end(), i.begin(), i.end());
                                      mask.insert(mask.end(), m.begin(), m.end());
                                    });
  CHECK(stats.documents == 200);
  CHECK(stats.tokens == static_cast<int64_t>(want_ids.size()));
  CHECK(ids == want_ids);
  CHECK(mask == want_mask);
}

namespace {

// Every id and mask byte tokenize_chats writes for `path`.
std::pair<std::vector<int32_t>, std::vector<uint8_t>> tokenized(const Tokenizer& tokenizer,
                                                                const ChatTemplate& chat,
                                                                const std::string& path) {
  std::vector<int32_t> ids;
  std::vector<uint8_t> mask;
  tokenize_chats(tokenizer, chat, {path}, {}, [&](std::span<const int32_t> i, std::span<const uint8_t> m) {
    ids.insert(ids.end(), i.begin(), i.end());
    mask.insert(mask.end(), m.begin(), m.end());
  });
  return {ids, mask};
}

}  // namespace

TEST_CASE("chat data: a preference record is its chosen example, then its rejected one, marked",
          "[text][chat][preference]") {
  const auto dir = make_temp_dir();
  // Standard records (strings) are rendered plain, as TRL trains on them, whatever template the
  // tokenizer has: the prompt, the answer, the EOS scored after it.
  const auto tokenizer = ampt::test::byte_tokenizer(kChatMl);
  write_file(dir + "/p.jsonl", R"({"prompt": "Hi?", "chosen": " Yes", "rejected": " No"})" "\n");
  CHECK(preference_form({dir + "/p.jsonl"}, InputFormat::by_extension) == PreferenceForm::standard);
  CHECK(holds_chat_records({dir + "/p.jsonl"}, InputFormat::by_extension, "text"));
  const auto [ids, mask] = tokenized(tokenizer, plain_chat_template(tokenizer), dir + "/p.jsonl");
  Expected chosen;
  chosen.text("Hi?").text(" Yes", true).add(256, true);
  Expected rejected;
  rejected.text("Hi?").text(" No", true).add(256, true);
  for (auto& bits : rejected.mask) bits |= kRejectedExample;
  auto want_ids = chosen.ids;
  want_ids.insert(want_ids.end(), rejected.ids.begin(), rejected.ids.end());
  auto want_mask = chosen.mask;
  want_mask.insert(want_mask.end(), rejected.mask.begin(), rejected.mask.end());
  CHECK(ids == want_ids);
  CHECK(mask == want_mask);

  // Conversational records go through the chat template, the prompt's turns ending in the
  // assistant's prefix (TRL's add_generation_prompt) and each answer's turn scored, ChatML's
  // newline after it too (TRL's answer is everything after the prompt).
  write_file(dir + "/c.jsonl",
             R"({"prompt": [{"role": "user", "content": "Hi?"}], )"
             R"("chosen": [{"role": "assistant", "content": "Yes"}], )"
             R"("rejected": [{"role": "assistant", "content": "No"}]})" "\n");
  CHECK(preference_form({dir + "/c.jsonl"}, InputFormat::by_extension) ==
        PreferenceForm::conversational);
  const auto chat = builtin_chat_template(tokenizer);
  const auto [chat_ids, chat_mask] = tokenized(tokenizer, chat, dir + "/c.jsonl");
  std::vector<int32_t> want_chat;
  std::vector<uint8_t> want_chat_mask;
  encode_chat(tokenizer, chat, {{Role::user, "Hi?"}, {Role::assistant, "Yes"}}, want_chat, want_chat_mask);
  const auto chosen_end = want_chat.size();
  encode_chat(tokenizer, chat, {{Role::user, "Hi?"}, {Role::assistant, "No"}}, want_chat, want_chat_mask);
  for (auto i = chosen_end; i < want_chat_mask.size(); ++i) want_chat_mask[i] |= kRejectedExample;
  // The newline that ends each example.
  want_chat_mask[chosen_end - 1] |= kScoredToken;
  want_chat_mask.back() |= kScoredToken;
  CHECK(chat_ids == want_chat);
  CHECK(chat_mask == want_chat_mask);
}

TEST_CASE("chat data: a bad preference record is one line naming its file, line and field",
          "[text][chat][preference][errors]") {
  const auto dir = make_temp_dir();
  const auto tokenizer = ampt::test::byte_tokenizer(kChatMl);
  const auto chat = builtin_chat_template(tokenizer);
  const std::string path = dir + "/prefs.jsonl";
  const auto error = [&](const std::string& first, const std::string& record,
                         const std::string& message) {
    INFO(record);
    write_file(path, first + "\n" + record + "\n");
    CHECK_THROWS_WITH(tokenize_chats(tokenizer, chat, {path}, {}, [](auto, auto) {}),
                      path + ": line 2: " + message);
  };
  const std::string standard = R"({"prompt": "a", "chosen": "b", "rejected": "c"})";
  const std::string conversational =
      R"({"prompt": [{"role": "user", "content": "a"}], "chosen": [{"role": "assistant", )"
      R"("content": "b"}], "rejected": [{"role": "assistant", "content": "c"}]})";
  error(standard, R"({"prompt": "a", "chosen": "b"})",
        "no \"rejected\": a preference record has \"prompt\", \"chosen\" and \"rejected\"");
  error(standard, R"({"prompt": "a", "chosen": 2, "rejected": "c"})",
        "\"chosen\" is a number: expected a string");
  error(standard, R"({"prompt": "a", "completion": "b"})",
        "an instruction record after a standard preference record (strings): the data holds one "
        "kind, as its first record says");
  error(standard, conversational,
        "a conversational preference record (messages) after a standard preference record "
        "(strings): the data holds one kind, as its first record says");
  error(conversational,
        R"({"prompt": [{"role": "user", "content": "a"}], "chosen": [{"role": "user", )"
        R"("content": "b"}], "rejected": [{"role": "assistant", "content": "c"}]})",
        "\"chosen\" holds no assistant turn: expected the assistant's answer, e.g. "
        "[{\"role\": \"assistant\", \"content\": \"...\"}]");
  error(conversational,
        R"({"prompt": [{"role": "user", "content": "a"}], "chosen": "b", )"
        R"("rejected": [{"role": "assistant", "content": "c"}]})",
        "\"chosen\" is a string: a conversational preference record's answers are lists holding "
        "the assistant turn");
  error(conversational,
        R"({"prompt": [{"role": "user", "content": "a"}], "chosen": [], )"
        R"("rejected": [{"role": "assistant", "content": "c"}]})",
        "\"chosen\" is an empty list: a conversational preference record's answers are lists "
        "holding the assistant turn");
}
