// A GPT-2 that transformers made (random weights, saved with save_pretrained) loaded with
// --init_from: the same logits and loss as GPT2LMHeadModel's, one file or shards; bad files refused.
#include "ampt/core/errors.h"
#include "ampt/hf/gpt2_config.h"
#include "ampt/hf/gpt2_weights.h"
#include "ampt/hf/pretrained.h"
#include "ampt/models/gpt_presets.h"
#include "ampt/models/registry.h"
#include "support/pretrained_reference.h"
#include "support/process.h"
#include "support/skip.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

using ampt::test::check_against_transformers;
using ampt::test::have_transformers;
using ampt::test::make_temp_dir;
using ampt::test::run_process;

namespace {

constexpr const char* kGpt2ModelScript = AMPT_SOURCE_DIR "/tests/hf/gpt2_reference.py";

// A fresh random GPT-2 directory from transformers; `extra` are make's flags.
std::string make_gpt2(const std::vector<std::string>& extra = {}) {
  return ampt::test::make_reference_model(kGpt2ModelScript, extra);
}

ampt::config::Config config_for(const std::string& dir) { return ampt::test::pretrained_config(dir); }

}  // namespace

TEST_CASE("hf import: logits and loss equal GPT2LMHeadModel's (fp32), padded vocabulary",
          "[hf][gpt2]") {
  if (!have_transformers()) {
    AMPT_SKIP(reference, "skipping: transformers is not installed in " AMPT_PYTHON);
  }
  // 100 tokens pad to 128: the padding must change no logit and no loss.
  check_against_transformers(make_gpt2({"--vocab", "100"}));
}

TEST_CASE("hf import: a sharded checkpoint and the exact GELU load the same way", "[hf][gpt2]") {
  if (!have_transformers()) {
    AMPT_SKIP(reference, "skipping: transformers is not installed in " AMPT_PYTHON);
  }
  const auto dir = make_gpt2({"--shard_kb", "40", "--activation", "gelu", "--n_layer", "3",
                              "--vocab", "128"});
  REQUIRE(ampt::hf::model_files(dir).weights.size() > 1);
  check_against_transformers(dir);
}

TEST_CASE("hf import: config.json decides the architecture, options may not contradict it",
          "[hf][gpt2]") {
  if (!have_transformers()) {
    AMPT_SKIP(reference, "skipping: transformers is not installed in " AMPT_PYTHON);
  }
  const auto dir = make_gpt2({"--n_positions", "32", "--vocab", "100"});
  auto config = config_for(dir);
  const auto dims = ampt::models::resolve_gpt_dims(config);
  CHECK(dims.n_layer == 2);
  CHECK(dims.block_size == 32);
  CHECK(dims.vocab_size == 128);
  CHECK(dims.valid_vocab == 100);
  CHECK(ampt::models::sample_request(config).vocab_size == 100);
  config.block_size = 16;  // shorter windows than the context are fine
  CHECK(ampt::models::sample_request(config).block_size == 16);
  config.block_size = 64;
  CHECK_THROWS_WITH(ampt::models::resolve_gpt_dims(config),
                    "block_size 64 exceeds " + dir + "/config.json's n_positions 32: the "
                    "pretrained model has no position embedding beyond it");
  config.block_size = 0;
  config.n_layer = 4;
  CHECK_THROWS_WITH(ampt::models::resolve_gpt_dims(config),
                    "n_layer 4 contradicts " + dir + "/config.json (n_layer 2): leave n_layer out "
                    "with init_from");
  config.n_layer = 0;
  config.model = "gpt2-124m";
  CHECK_THROWS_WITH(ampt::models::resolve_gpt_dims(config),
                    Catch::StartsWith("model gpt2-124m (n_layer 12, n_embd 768, n_head 12) is not "
                                      "the architecture of"));
}

TEST_CASE("hf import: a missing, misshapen or unknown tensor names the file and the tensor",
          "[hf][gpt2]") {
  if (!have_transformers()) {
    AMPT_SKIP(reference, "skipping: transformers is not installed in " AMPT_PYTHON);
  }
  const auto dir = make_gpt2();
  const auto files = ampt::hf::model_files(dir);
  auto hf_config = ampt::hf::read_gpt2_config(files.config_json);
  hf_config.n_layer = 3;
  CHECK_THROWS_WITH(ampt::hf::read_gpt2_weights(files, hf_config, ampt::models::declared_linears(hf_config), 128),
                    dir + "/model.safetensors: no tensor transformer.h.2.ln_1.weight (a GPT-2 of 3 "
                          "layers has one)");
  hf_config.n_layer = 1;
  CHECK_THROWS_WITH(ampt::hf::read_gpt2_weights(files, hf_config, ampt::models::declared_linears(hf_config), 128),
                    Catch::Contains("is not part of a GPT-2 of 1 layers"));
  hf_config.n_layer = 2;
  hf_config.n_positions = 128;
  CHECK_THROWS_WITH(ampt::hf::read_gpt2_weights(files, hf_config, ampt::models::declared_linears(hf_config), 128),
                    dir + "/model.safetensors: tensor wpe.weight has shape [64, 32], config.json's "
                          "dimensions give [128, 32]");
  // A file cut short: its last tensor runs past the end.
  const auto data = ampt::test::read_file(files.weights.front());
  ampt::test::write_file(files.weights.front(), data.substr(0, data.size() - 100));
  const auto saved = ampt::hf::read_gpt2_config(files.config_json);
  CHECK_THROWS_WITH(ampt::hf::read_gpt2_weights(files, saved, ampt::models::declared_linears(saved), 128),
                    Catch::Contains(files.weights.front() + ": tensor ") &&
                        Catch::Contains("the file is truncated"));
}

TEST_CASE("hf import: config.json that ampt cannot build is one line naming the key",
          "[hf][gpt2]") {
  const auto dir = make_temp_dir();
  const auto path = dir + "/config.json";
  const auto refuse = [&](const std::string& json, const std::string& message) {
    ampt::test::write_file(path, json);
    CHECK_THROWS_WITH(ampt::hf::read_gpt2_config(path), message);
  };
  const std::string dims = R"("n_layer": 2, "n_embd": 32, "n_head": 4, "n_positions": 64, "vocab_size": 100)";
  refuse("{" + dims + R"(, "model_type": "llama"})", path + ": model_type is llama, ampt loads gpt2 models only");
  refuse(R"({"n_layer": 2})", path + ": no n_embd");
  refuse("{" + dims + R"(, "activation_function": "relu"})",
         path + ": activation_function relu is not one ampt's GPT runs (gelu_new, gelu_pytorch_tanh or gelu)");
  refuse("{" + dims + R"(, "n_inner": 100})", path + ": n_inner 100 is not 4 x n_embd (128), the MLP width ampt's GPT has");
  refuse("{" + dims + R"(, "scale_attn_by_inverse_layer_idx": true})",
         path + ": scale_attn_by_inverse_layer_idx is true, which ampt's GPT does not implement (it needs false)");
  ampt::test::write_file(path, "{not json");
  CHECK_THROWS_WITH(ampt::hf::read_gpt2_config(path), Catch::StartsWith(path + ": not JSON"));
  ampt::test::write_file(path, "{" + dims + "}");
  CHECK(ampt::hf::read_gpt2_config(path).n_positions == 64);
}

TEST_CASE("hf import: ampt train --init_from starts from the pretrained weights", "[hf][gpt2][cli]") {
  if (!have_transformers()) {
    AMPT_SKIP(reference, "skipping: transformers is not installed in " AMPT_PYTHON);
  }
  const auto dir = make_gpt2({"--vocab", "100"});
  const auto out = make_temp_dir();
  const auto r = ampt::test::run_ampt({"train", "--init_from", dir, "--max_steps", "3",
                                       "--batch_size", "4", "--block_size", "16",
                                       "--synthetic_samples", "64", "--output_dir", out});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("[AMP] Model: gpt (n_layer 2, n_embd 32, n_head 4, block_size "
                                    "64, vocab_size 128 (100 tokens)"));
  CHECK_THAT(r.out, Catch::Contains("[AMP] Weights: pretrained, from " + dir +
                                    " (28 tensors from 1 file; vocabulary 100 padded to 128)"));
  // Before the first step the pretrained weights are evaluated: the summary compares.
  const auto summary = YAML::LoadFile(out + "/summary.json");
  const double before = summary["initial_val_loss"].as<double>();
  const double after = summary["final_val_loss"].as<double>();
  CHECK(before != after);
  const auto metrics = YAML::Load(ampt::test::read_file(out + "/metrics.jsonl").substr(
      0, ampt::test::read_file(out + "/metrics.jsonl").find('\n')));
  CHECK(metrics["step"].as<int64_t>() == 0);
  CHECK(metrics["val_loss"].as<double>() == Approx(before).epsilon(1e-12));
  CHECK_THAT(r.out, Catch::Contains(fmt::format("Val Perplexity:   {:.2f} pretrained → {:.2f} after "
                                                "3 steps", std::exp(before), std::exp(after))));
}
