// `ampt export --format hf`: a GPT fine-tuned from a transformers GPT-2 goes back as a directory
// that GPT2LMHeadModel.from_pretrained and AutoTokenizer.from_pretrained load, with ampt's logits
// and GPT-2's token ids; what it refuses, in one line.
#include "ampt/checkpoint/checkpoint.h"
#include "ampt/commands/run_model.h"
#include "ampt/text/tokenizer_files.h"
#include "support/gpt2_reference.h"
#include "support/process.h"
#include "support/skip.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>

using ampt::test::make_temp_dir;
using ampt::test::read_file;
using ampt::test::run_ampt;
using ampt::test::run_process;

namespace {

// Trains `flags` for 3 steps on the CPU and returns the checkpoint.
std::string trained(std::vector<std::string> flags) {
  const auto out = make_temp_dir();
  flags.insert(flags.begin(), "train");
  flags.insert(flags.end(), {"--device", "cpu", "--max_steps", "3", "--batch_size", "4",
                             "--block_size", "16", "--lr", "1e-2", "--output_dir", out});
  const auto r = run_ampt(flags);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return out + "/ckpt-00000003.pt";
}

// The exported directory's logits (transformers) against the checkpoint's (ampt), fp32.
void check_logits(const std::string& checkpoint, const std::string& exported) {
  const std::optional<ampt::checkpoint::Checkpoint> saved = ampt::checkpoint::load(checkpoint);
  const auto config = ampt::commands::run_config(saved, {"--device", "cpu"}, {});
  auto model = ampt::commands::load_run_model(config, saved, checkpoint, torch::kCPU);
  const std::string tokens_json = "[[1, 7, 42, 99, 3, 250, 17, 8], [5, 5, 200, 31, 0, 64, 128, 2]]";
  std::vector<int64_t> flat;
  for (const auto& row : YAML::Load(tokens_json).as<std::vector<std::vector<int64_t>>>()) {
    flat.insert(flat.end(), row.begin(), row.end());
  }
  const auto both = torch::tensor(flat).view({2, -1});
  torch::NoGradGuard no_grad;
  const auto logits = model.forward(both);
  const auto r = run_process({AMPT_PYTHON, ampt::test::kGpt2Reference, "logits", exported, tokens_json});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto expected =
      torch::tensor(YAML::Load(r.out).as<std::vector<float>>()).view(logits.sizes());
  const double max_diff = (logits - expected).abs().max().item<double>();
  INFO("max |logit difference| " << max_diff);
  CHECK(max_diff <= 1e-4);
}

}  // namespace

TEST_CASE("hf export: from_pretrained gives ampt's logits, AutoTokenizer GPT-2's ids", "[hf][gpt2]") {
  if (!ampt::test::have_gpt2_references()) {
    AMPT_SKIP(reference, "skipping: transformers/tiktoken or .deps/gpt2.tiktoken (scripts/bootstrap.sh) missing");
  }
  const auto pretrained = make_temp_dir();
  ampt::test::make_pretrained_gpt2(pretrained, {"--n_embd", "48"});
  const auto checkpoint = trained({"--init_from", pretrained});
  const auto exported = make_temp_dir() + "/finetuned";
  const auto r = run_ampt({"export", "--format", "hf", "--checkpoint", checkpoint, "--out", exported});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out == "wrote " + exported + ": config.json, model.safetensors, tokenizer.json, vocab.json, "
                 "merges.txt, tokenizer_config.json from " + checkpoint + " (step 3)\n");
  check_logits(checkpoint, exported);

  // The real 50257 rows (the padding to 50304 stays behind) and GPT-2's <|endoftext|>.
  const auto config = YAML::LoadFile(exported + "/config.json");
  CHECK(config["vocab_size"].as<int64_t>() == 50257);
  CHECK(config["eos_token_id"].as<int64_t>() == 50256);
  // The run's tokenizer files, copied byte for byte: its tokenizer_config.json names its class.
  for (const auto* name : {"tokenizer.json", "vocab.json", "merges.txt", "tokenizer_config.json"}) {
    INFO(name);
    CHECK(read_file(exported + "/" + name) == read_file(pretrained + "/" + name));
  }
  const std::string text = "Hello  world!\n\tIt's 2026 — naïve café, 日本語 🙂 x=1;  ";
  const auto tokenized = run_process({AMPT_PYTHON, ampt::test::kGpt2Reference, "tokenize", exported, text});
  INFO(tokenized.err);
  REQUIRE(tokenized.exit_code == 0);
  const auto reply = YAML::Load(tokenized.out);
  // transformers 5 names its tokenizers-backed class GPT2Tokenizer, 4 GPT2TokenizerFast.
  CHECK_THAT(reply["class"].as<std::string>(), Catch::Matches("GPT2Tokenizer(Fast)?"));
  CHECK(reply["ids"].as<std::vector<int32_t>>() == ampt::text::load_tokenizer(ampt::test::kGpt2Ranks).encode(text));
  CHECK(reply["eos"].as<std::string>() == "<|endoftext|>");
}

TEST_CASE("hf export: a GPT trained without a tokenizer goes without one, with a warning",
          "[hf][gpt2]") {
  if (!ampt::test::have_gpt2_references()) {
    AMPT_SKIP(reference, "skipping: transformers/tiktoken or .deps/gpt2.tiktoken (scripts/bootstrap.sh) missing");
  }
  const auto checkpoint = trained({"--model", "gpt-tiny"});
  const auto exported = make_temp_dir() + "/tiny";
  const auto r = run_ampt({"export", "--format", "hf", "--checkpoint", checkpoint, "--out", exported});
  REQUIRE(r.exit_code == 0);
  CHECK(r.err == "ampt: warning: the run of " + checkpoint + " had no tokenizer (no --tokenizer, no init_from): " +
                     exported + " gets none; add --tokenizer PATH for AutoTokenizer\n");
  CHECK_FALSE(std::filesystem::exists(exported + "/vocab.json"));
  CHECK(YAML::LoadFile(exported + "/config.json")["eos_token_id"].IsNull());
  check_logits(checkpoint, exported);
  // A tokenizer larger than the model is refused.
  const auto too_big = run_ampt({"export", "--format", "hf", "--checkpoint", checkpoint, "--out",
                                 exported, "--tokenizer", ampt::test::kGpt2Ranks});
  CHECK(too_big.exit_code == 2);
  CHECK_THAT(too_big.err, Catch::Matches("ampt: error: the tokenizer .*gpt2.tiktoken has 50257 "
                                         "tokens but the model has [0-9]+\n"));
}

TEST_CASE("hf export: what --format hf refuses, in one line", "[hf][gpt2]") {
  const auto checkpoint = trained({"--model", "mlp", "--synthetic_samples", "256"});
  auto r = run_ampt({"export", "--format", "hf", "--checkpoint", checkpoint, "--out", make_temp_dir()});
  CHECK(r.exit_code == 2);
  CHECK(r.err == "ampt: error: --format hf writes a Hugging Face model, and " + checkpoint +
                     " holds a mlp model, which has none: use --format safetensors\n");
  r = run_ampt({"export", "--checkpoint", checkpoint, "--out", make_temp_dir() + "/m.safetensors",
                "--tokenizer", ampt::test::kGpt2Ranks});
  CHECK(r.exit_code == 2);
  CHECK(r.err == "ampt: error: --tokenizer goes with --format hf (a safetensors file holds tensors "
                 "only)\n");
}
