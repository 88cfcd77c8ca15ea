#include "ampt/core/errors.h"
#include "ampt/text/tokenizer_files.h"
#include "support/process.h"

#include <catch2/catch.hpp>

#include <map>

using ampt::RuntimeError;
using ampt::test::make_temp_dir;
using ampt::test::write_file;
using ampt::text::load_tokenizer;
using ampt::text::SpecialTokens;

namespace {

// GPT-2's bytes_to_unicode, written out independently of the library: printable bytes stand for
// themselves, the rest for U+0100 onwards in byte order. JSON \u escapes of them.
std::string byte_level(const std::string& bytes) {
  std::map<int, int> code;
  int shifted = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    code[b] = printable ? b : shifted++;
  }
  std::string out;
  for (const char c : bytes) {
    char escaped[8];
    std::snprintf(escaped, sizeof escaped, "\\u%04x", code[static_cast<unsigned char>(c)]);
    out += escaped;
  }
  return out;
}

std::string base64(const std::string& bytes) {
  static const char* digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t group = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) group |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) group |= static_cast<unsigned char>(bytes[i + 2]);
    out += digits[(group >> 18) & 63];
    out += digits[(group >> 12) & 63];
    out += i + 1 < bytes.size() ? digits[(group >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? digits[group & 63] : '=';
  }
  return out;
}

// A toy GPT-2-style tokenizer: bytes are ids 0..255, then "ab" 256, "abc" 257, " abc" 258, and
// <|endoftext|> 259.
const std::vector<std::pair<std::string, std::string>> kMerges = {{"a", "b"}, {"ab", "c"}, {" ", "abc"}};

std::string vocab_json(bool with_eot = true) {
  std::string out = "{";
  for (int b = 0; b < 256; ++b) {
    out += "\"" + byte_level(std::string(1, static_cast<char>(b))) + "\": " + std::to_string(b) + ", ";
  }
  int id = 256;
  for (const auto& [l, r] : kMerges) out += "\"" + byte_level(l + r) + "\": " + std::to_string(id++) + ", ";
  if (with_eot) out += "\"<|endoftext|>\": 259";
  else out.resize(out.size() - 2);
  return out + "}";
}

std::string merges_txt() {
  std::string out = "#version: 0.2\n";
  for (const auto& [l, r] : kMerges) out += byte_level(l) + " " + byte_level(r) + "\n";
  return out;
}

// Merge lines are written with \u escapes above; a merges.txt holds the characters themselves.
std::string unescape(const std::string& json_escaped) {
  std::string out;
  for (std::size_t i = 0; i < json_escaped.size(); ++i) {
    if (json_escaped.compare(i, 2, "\\u") != 0) {
      out += json_escaped[i];
      continue;
    }
    const int c = std::stoi(json_escaped.substr(i + 2, 4), nullptr, 16);
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
    i += 5;
  }
  return out;
}

std::string tokenizer_json(const std::string& model_type = "BPE",
                           const std::string& pre_tokenizer = R"({"type": "ByteLevel", "add_prefix_space": false, "use_regex": true})",
                           const std::string& normalizer = "null") {
  std::string merges;
  for (const auto& [l, r] : kMerges) merges += (merges.empty() ? "" : ", ") + ("[\"" + byte_level(l) + "\", \"" + byte_level(r) + "\"]");
  return R"({"version": "1.0", "added_tokens": [{"id": 259, "content": "<|endoftext|>", "special": true}],
  "normalizer": )" + normalizer + R"(, "pre_tokenizer": )" + pre_tokenizer + R"(,
  "model": {"type": ")" + model_type + R"(", "vocab": )" + vocab_json(false) + R"(, "merges": [)" + merges + "]}}";
}

constexpr const char* kLlama3Pattern = R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+)";
constexpr const char* kQwen2 = R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+)";

// Llama-3's and Qwen2's pre_tokenizer with `regex` (JSON-escaped) as its Split pattern.
std::string split_pre_tokenizer(const std::string& regex, const std::string& behavior = "Isolated",
                                const std::string& use_regex = "false") {
  return R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": ")" + regex +
         R"("}, "behavior": ")" + behavior + R"(", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": )" +
         use_regex + "}]}";
}

std::string tiktoken_file() {
  std::string out;
  for (int b = 0; b < 256; ++b) out += base64(std::string(1, static_cast<char>(b))) + " " + std::to_string(b) + "\n";
  int id = 256;
  for (const auto& [l, r] : kMerges) out += base64(l + r) + " " + std::to_string(id++) + "\n";
  return out;
}

// Expects load_tokenizer(path) to fail with one line naming `file` and containing `reason`.
void expect_error(const std::string& path, const std::string& file, const std::string& reason) {
  INFO("loading " << path);
  try {
    load_tokenizer(path);
    FAIL("no error");
  } catch (const RuntimeError& e) {
    const std::string message = e.what();
    CHECK(message.find(file) != std::string::npos);
    CHECK(message.find(reason) != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
  }
}

}  // namespace

TEST_CASE("text: toy tokenizer gives the hand-computed ids in all three file formats", "[text]") {
  const std::string dir = make_temp_dir();
  write_file(dir + "/hf/tokenizer.json", tokenizer_json());
  write_file(dir + "/gpt2/vocab.json", vocab_json());
  write_file(dir + "/gpt2/merges.txt", unescape(merges_txt()));
  write_file(dir + "/tk/toy.tiktoken", tiktoken_file());
  for (const std::string& path : {dir + "/hf", dir + "/hf/tokenizer.json", dir + "/gpt2",
                                 dir + "/gpt2/merges.txt", dir + "/tk", dir + "/tk/toy.tiktoken"}) {
    INFO(path);
    const auto tokenizer = load_tokenizer(path);
    CHECK(tokenizer.vocab_size() == 260);
    CHECK(tokenizer.eot_id() == 259);
    // "abcab" is one piece: "ab" merges first (rank 0), then "ab"+"c" (rank 1); " abc" is rank 2.
    CHECK(tokenizer.encode("abcab abc") == std::vector<int32_t>{257, 256, 258});
    CHECK(tokenizer.encode("ab<|endoftext|>c", SpecialTokens::allowed) == std::vector<int32_t>{256, 259, 'c'});
    CHECK(tokenizer.encode("<|endoftext|>").size() == 13);  // as text: bytes, nothing merges
    CHECK(tokenizer.decode(std::vector<int32_t>{257, 259, 258}) == "abc<|endoftext|> abc");
    CHECK_THROWS_WITH(tokenizer.decode(std::vector<int32_t>{260}), Catch::Contains("token id 260 is outside"));
  }
}

TEST_CASE("text: tokenizer paths that hold no tokenizer are named in the error", "[text]") {
  const std::string dir = make_temp_dir();
  expect_error(dir + "/nothing", dir + "/nothing", "tokenizer not found");
  write_file(dir + "/empty_dir/README", "x");
  expect_error(dir + "/empty_dir", dir + "/empty_dir", "no tokenizer files");
  write_file(dir + "/two/a.tiktoken", tiktoken_file());
  write_file(dir + "/two/b.tiktoken", tiktoken_file());
  expect_error(dir + "/two", dir + "/two", "more than one *.tiktoken");
  write_file(dir + "/lonely/vocab.json", vocab_json());
  expect_error(dir + "/lonely", dir + "/lonely/merges.txt", "missing");
  write_file(dir + "/empty/tokenizer.json", "");
  expect_error(dir + "/empty", dir + "/empty/tokenizer.json", "file is empty");
}

TEST_CASE("text: bad tokenizer.json files are refused with the file and the reason", "[text]") {
  const std::string dir = make_temp_dir();
  const auto check = [&](const std::string& name, const std::string& text, const std::string& reason) {
    write_file(dir + "/" + name, text);
    expect_error(dir + "/" + name, dir + "/" + name, reason);
  };
  const std::string good = tokenizer_json();
  check("truncated.json", good.substr(0, good.size() / 2), "invalid JSON");
  check("truncated2.json", good.substr(0, good.size() / 2), "unexpected end");
  check("array.json", "[1, 2]", "no \"model\" object");
  check("wordpiece.json", tokenizer_json("WordPiece"), "model type WordPiece is not supported");
  check("metaspace.json", tokenizer_json("BPE", R"({"type": "Metaspace"})"),
        "pre_tokenizer Metaspace with replacement \"\", split true and prepend_scheme always is "
        "not supported: ampt implements \"\xE2\x96\x81\", split false, prepend_scheme first or always");
  // SentencePiece's pipeline, but without byte fallback, or a byte-level one with it, or a token
  // that crosses a word.
  const std::string metaspace =
      R"({"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": false})";
  check("no_fallback.json", tokenizer_json("BPE", metaspace),
        "SentencePiece BPE without byte_fallback is not supported");
  const auto with_fallback = [](std::string json) {
    return json.replace(json.find("\"type\": \"BPE\""), 13, "\"type\": \"BPE\", \"byte_fallback\": true");
  };
  check("fallback.json", with_fallback(tokenizer_json()),
        "model option byte_fallback is supported with SentencePiece's pipeline only");
  auto crossing = with_fallback(tokenizer_json("BPE", metaspace));
  const auto at = crossing.find("\": 256,");  // token 256 becomes "a▁b"
  const auto open = crossing.rfind('"', at - 1);
  crossing.replace(open + 1, at - open - 1, "a\\u2581b");
  check("crossing.json", crossing, "holds a \"\xE2\x96\x81\" after other characters");
  check("prefix.json", tokenizer_json("BPE", R"({"type": "ByteLevel", "add_prefix_space": true})"),
        "pre_tokenizer ByteLevel with use_regex false or add_prefix_space true is not supported");
  check("unknown_split.json", tokenizer_json("BPE", split_pre_tokenizer(R"(\\w+)")),
        "pre_tokenizer Split with the regex \\w+ is not supported: ampt implements GPT-2's ByteLevel");
  check("cl100k_possessive.json", tokenizer_json("BPE", split_pre_tokenizer(R"('(?i:[sdmt]|ll|ve|re)|\\s)")),
        "Split with the regex '(?i:[sdmt]|ll|ve|re)|\\s is not supported");
  check("removed.json", tokenizer_json("BPE", split_pre_tokenizer(kLlama3Pattern, "Removed")),
        "pre_tokenizer Split with behavior Removed and invert false is not supported");
  check("regex_twice.json", tokenizer_json("BPE", split_pre_tokenizer(kLlama3Pattern, "Isolated", "true")),
        "Sequence [Split, ByteLevel] with a ByteLevel of use_regex true");
  check("whitespace.json", tokenizer_json("BPE", R"({"type": "Sequence", "pretokenizers": [{"type": "Split"}, {"type": "Whitespace"}]})"),
        "pre_tokenizer Sequence [Split, Whitespace] is not supported");
  // NFC (Qwen2's) is implemented; other normalizers are not.
  check("nfkc.json", tokenizer_json("BPE", split_pre_tokenizer(kQwen2), R"({"type": "NFKC"})"),
        "normalizer NFKC is not supported (ampt implements NFC, Qwen2's, none");
  check("lstrip.json", tokenizer_json("BPE", split_pre_tokenizer(kLlama3Pattern)).replace(good.find("\"special\""), 0, "\"lstrip\": true, "),
        "added token \"<|endoftext|>\" has lstrip true, which ampt does not implement");
  // The good file with the first `from` replaced by `to`.
  const auto edited = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    return text.replace(text.find(from), from.size(), to);
  };
  check("unknown_merge.json", edited("\"merges\": [", R"("merges": [["\u0061", "zz"], )"),
        "merge \"a zz\" names a token that is not in the vocabulary");
  check("gap.json", edited("\": 258", "\": 300"), "has id 300, but ids must be 0..258");
  check("twice.json", edited("\": 258", "\": 257"), "id 257 is given to two tokens");
  check("euro.json", edited("\": 258", "\\u20ac\": 258"), "is not in GPT-2's byte-level alphabet");
  check("no_eot.json", edited("\"<|endoftext|>\"", "\"<|end|>\""), "no special token <|endoftext|>");
  check("no_byte.json", edited("\"\\u007a\": 122", "\"\\u007a\\u007a\": 122"), "no token for the byte 0x7A");
}

TEST_CASE("text: bad vocab.json and merges.txt files are refused with the file and the reason", "[text]") {
  const std::string dir = make_temp_dir();
  const auto check = [&](const std::string& name, const std::string& vocab, const std::string& merges,
                         const std::string& file, const std::string& reason) {
    write_file(dir + "/" + name + "/vocab.json", vocab);
    write_file(dir + "/" + name + "/merges.txt", merges);
    expect_error(dir + "/" + name, dir + "/" + name + "/" + file, reason);
  };
  const std::string merges = unescape(merges_txt());
  check("truncated", vocab_json().substr(0, 500), merges, "vocab.json", "unexpected end");
  check("no_eot", vocab_json(false), merges, "vocab.json", "no token <|endoftext|>");
  check("bad_line", vocab_json(), merges + "abc\n", "merges.txt", "line 5: expected two tokens separated by one space");
  check("unknown", vocab_json(), merges + "a zz\n", "merges.txt", "line 5: merge \"a zz\" names a token");
  check("no_result", vocab_json(), merges + "b c\n", "merges.txt", "the result of merge \"b c\" is not in the vocabulary");
  check("empty_merges", vocab_json(), "", "merges.txt", "file is empty");
}

TEST_CASE("text: bad tiktoken files are refused with the file, the line and the reason", "[text]") {
  const std::string dir = make_temp_dir();
  const auto check = [&](const std::string& name, const std::string& text, const std::string& reason) {
    write_file(dir + "/" + name + ".tiktoken", text);
    expect_error(dir + "/" + name + ".tiktoken", dir + "/" + name + ".tiktoken", reason);
  };
  const std::string good = tiktoken_file();
  check("truncated", good.substr(0, good.size() - 6), "line 259: expected \"base64-token rank\", found no space");
  check("bad_base64", "@@== 0\n" + good, "line 1: \"@@==\" is not base64");
  check("bad_rank", good + "YWJj x\n", "line 260: rank \"x\" is not a whole number");
  check("rank_twice", good + "YWJjYQ== 5\n", "line 260: rank 5 is given twice");
  check("token_twice", good + "YQ== 300\n", "line 260: the same token is given twice");
  check("gap", good + "YWJjYQ== 300\n", "ranks must be 0..300 without gaps: 259 is missing");
  check("no_byte", good.substr(good.find('\n') + 1), "ranks must be 0..258 without gaps: 0 is missing");
  // Past GPT-2's family a rank file's size must be a known encoding's: this is none.
  std::string large = good;
  for (int id = 259; id < 60000; ++id) large += base64(std::string("\xF0") + static_cast<char>(id & 0xFF) + static_cast<char>(id >> 8)) + " " + std::to_string(id) + "\n";
  check("large", large, "60000 ranks is no encoding ampt knows the pattern and special tokens of");
}

TEST_CASE("text: a Llama-3-style tokenizer.json and its tokenizer_config.json set the pattern, BOS and EOS", "[text]") {
  const std::string dir = make_temp_dir();
  // Llama-3's shape: the Split pattern, added tokens past the BPE's ids, a Sequence post_processor
  // whose TemplateProcessing puts <|begin_of_text|> first, ignore_merges.
  std::string json = tokenizer_json("BPE", split_pre_tokenizer(kLlama3Pattern));
  json.replace(json.find("true}]"), 6, R"(true}, {"id": 260, "content": "<|begin_of_text|>", "special": true}])");
  json.replace(json.find("\"type\": \"BPE\""), 0, R"("ignore_merges": true, )");
  json.replace(json.find("\"model\""), 0, R"("post_processor": {"type": "Sequence", "processors": [{"type": "ByteLevel"},
    {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}]}]}, )");
  write_file(dir + "/llama/tokenizer.json", json);
  const auto tokenizer = load_tokenizer(dir + "/llama");
  CHECK(tokenizer.pre_tokenizer() == ampt::text::PreTokenizer::llama3);
  CHECK(tokenizer.kind() == "Llama-3 BPE");
  CHECK(tokenizer.vocab_size() == 261);
  CHECK(tokenizer.bos_id() == 260);
  CHECK(tokenizer.eot_id() == 259);  // no tokenizer_config.json: <|endoftext|>
  // Digits in threes; "'S" is a contraction; a space before punctuation stays with it.
  CHECK(tokenizer.encode("1234'S ?abc") == std::vector<int32_t>{'1', '2', '3', '4', '\'', 'S', ' ', '?', 257});
  CHECK(tokenizer.encode("<|begin_of_text|>abc", SpecialTokens::allowed) == std::vector<int32_t>{260, 257});

  write_file(dir + "/llama/tokenizer_config.json", R"({"bos_token": "<|begin_of_text|>", "eos_token": {"content": "<|begin_of_text|>"}, "add_bos_token": false})");
  const auto configured = load_tokenizer(dir + "/llama/tokenizer.json");
  CHECK(configured.bos_id() == -1);
  CHECK(configured.eot_id() == 260);
  CHECK(configured.fingerprint() != tokenizer.fingerprint());

  const auto bad_config = [&](const std::string& config, const std::string& reason) {
    write_file(dir + "/llama/tokenizer_config.json", config);
    expect_error(dir + "/llama", dir + "/llama/tokenizer_config.json", reason);
  };
  bad_config(R"({"eos_token": "<|eot_id|>"})", "eos_token \"<|eot_id|>\" is not a token of " + dir + "/llama/tokenizer.json");
  bad_config(R"({"add_bos_token": true, "bos_token": null})", "add_bos_token is true but bos_token is null");
  bad_config(R"({"eos_token": 7})", "eos_token is not a string or an object with \"content\"");
  bad_config("{", "invalid JSON");
}
