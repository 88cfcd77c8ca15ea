// LoRA against peft, on tiny GPT-2 and Llama bases that transformers made: ampt continues a
// peft adapter (--init_from ADAPTER) step for step as a PyTorch + peft loop does, changes only
// the adapters, and its exports load in peft (--format peft) and in transformers (--merge) with
// ampt's logits and greedy tokens.
#include "ampt/checkpoint/checkpoint.h"
#include "ampt/checkpoint/safetensors.h"
#include "ampt/commands/run_model.h"
#include "ampt/hf/pretrained.h"
#include "ampt/models/generation.h"
#include "ampt/models/linear.h"
#include "ampt/precision/nf4.h"
#include "support/decoding.h"
#include "support/json_field.h"
#include "support/pretrained_reference.h"
#include "support/process.h"
#include "support/skip.h"
#include "support/python_modules.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <regex>

using ampt::test::have_transformers;
using ampt::test::make_temp_dir;
using ampt::test::run_ampt;
using ampt::test::run_process;

namespace {

constexpr const char* kLora = AMPT_SOURCE_DIR "/tests/hf/lora_reference.py";
constexpr const char* kGpt2 = AMPT_SOURCE_DIR "/tests/hf/gpt2_reference.py";
constexpr const char* kLlama = AMPT_SOURCE_DIR "/tests/hf/llama_reference.py";
constexpr const char* kPrompt = "[[3, 14, 15, 92, 65, 35, 89, 79]]";

bool have_peft() {
  return ampt::test::python_has("transformers, peft");
}

struct Base {
  std::string name;
  std::string dir;
  std::string targets;     // peft's target_modules for the adapter
  std::string parameters;  // and its target_parameters (expert weights)
};

Base make_base(const std::string& name) {
  if (name == "qwen3-moe") {
    // moe_reference.py's Qwen3-MoE (3 layers, the middle one dense, top-2 of 8 experts), without
    // the load-balancing loss, which peft's loop does not add: adapters on attention and on both
    // expert weights of the sparse blocks. (peft takes an MLP name as a target_parameters of a
    // sparse model: "down_proj" would leave the dense block's alone, and "up_proj" it refuses.)
    const auto dir = make_temp_dir() + "/moe";
    const auto r = run_process({AMPT_PYTHON, AMPT_SOURCE_DIR "/tests/hf/moe_reference.py", "make",
                                dir, "--flavour", "qwen3_moe", "--coef", "0"});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return {name, dir, "q_proj,v_proj", "mlp.experts.gate_up_proj,mlp.experts.down_proj"};
  }
  if (name == "gpt2") {
    return {name,
            ampt::test::make_reference_model(kGpt2, {"--n_layer", "2", "--n_embd", "32", "--n_head",
                                                     "4", "--n_positions", "64", "--vocab", "100"}),
            "c_attn,c_proj"};
  }
  // Qwen3 has all of the Llama family's shapes: heads wider than hidden / heads (q_proj's
  // adapter is [r, 64] by [128, r], o_proj's the other way), fewer key-value heads (v_proj
  // narrower), and the MLP's up and down.
  return {name,
          ampt::test::make_reference_model(kLlama, {"--flavour", "qwen3", "--head_dim", "32"}),
          "q_proj,v_proj,o_proj,up_proj,down_proj"};
}

// peft's adapter of `base`, B random as well as A.
std::string make_adapter(const Base& base) {
  const auto dir = make_temp_dir() + "/adapter";
  const auto r = run_process({AMPT_PYTHON, kLora, "init", base.dir, dir, "--rank", "4", "--alpha",
                              "8", "--targets", base.targets, "--parameters", base.parameters});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return dir;
}

// Four windows of 16 + 1 tokens: one batch, the same every step.
std::string token_file() {
  const auto data = make_temp_dir() + "/train.bin";
  std::ofstream out(data, std::ios::binary);
  for (int i = 0; i < 65; ++i) {
    const auto token = static_cast<uint16_t>((i * 37 + i * i) % 100);
    out.write(reinterpret_cast<const char*>(&token), 2);
  }
  return data;
}


// ampt continues `adapter` (which names its base: --init_from takes the adapter alone) for 20
// AdamW steps at `lr` in fp32 on `data`, its frozen base stored as `base_dtype`, saving every
// `save_every` steps and keeping each checkpoint.
ampt::test::ProcessResult train_from_adapter(const std::string& adapter, const std::string& data,
                                             const std::string& out, const std::string& base_dtype,
                                             const std::string& lr = "1e-2",
                                             const std::string& save_every = "20") {
  auto r = run_ampt({"train", "--init_from", adapter, "--dataset", "tokens:" + data,
                     "--block_size", "16", "--batch_size", "4", "--val_fraction", "0",
                     "--max_steps", "20", "--lr", lr, "--warmup_steps", "0", "--min_lr_ratio",
                     "1", "--weight_decay", "0", "--max_grad_norm", "0", "--adam_beta1", "0.9",
                     "--adam_beta2", "0.95", "--adam_eps", "1e-8", "--mixed_precision", "no",
                     "--log_every", "1", "--device", "cpu", "--save_every", save_every,
                     "--keep_checkpoints", "20", "--output_dir", out, "--base_dtype", base_dtype});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return r;
}

// The losses of ampt's run in `out` against a PyTorch loop over peft's PeftModel (on a
// bitsandbytes 4-bit base for nf4), step for step to `tolerance` of each; returns ampt's. With
// `grads`, the loop writes its first step's adapter gradients there.
std::vector<double> follows_peft(const Base& base, const std::string& adapter,
                                 const std::string& data, const std::string& out,
                                 const std::string& base_dtype, const std::string& lr = "1e-2",
                                 double tolerance = 1e-4, const std::string& grads = "") {
  const auto reference =
      run_process({AMPT_PYTHON, kLora, "finetune", base.dir, adapter, data, "16", "20", lr,
                   "0.9", "0.95", "1e-8", "--base_dtype", base_dtype, "--grads", grads});
  INFO(reference.err);
  REQUIRE(reference.exit_code == 0);
  const auto expected = YAML::Load(reference.out).as<std::vector<double>>();
  const auto losses = ampt::test::step_losses(ampt::test::read_file(out + "/metrics.jsonl"));
  REQUIRE(losses.size() == expected.size());
  for (std::size_t i = 0; i < losses.size(); ++i) {
    INFO("step " << i + 1 << ": ampt " << losses[i] << ", peft " << expected[i]);
    CHECK(std::abs(losses[i] - expected[i]) <= tolerance * std::abs(expected[i]));
  }
  CHECK(losses.back() < losses.front() - 0.3);
  return losses;
}

// The checkpoint ampt's run left in `out` holds the adapters alone and names its base; the model
// it makes holds the base's own bytes (nf4: its storage, quantized from them again); its peft and
// merged exports give transformers ampt's logits and greedy tokens (peft over a bitsandbytes 4-bit
// base for nf4: the merged model is its dequantized weights with the adapters folded in).
void check_exports(const Base& base, const std::string& out, const std::string& base_dtype) {
  const auto path = out + "/ckpt-00000020.pt";
  const auto saved = ampt::checkpoint::load(path);
  CHECK(saved.base_model == base.dir);
  CHECK(saved.base_fingerprint.size() == 16);
  for (const auto& [tensor_name, tensor] : saved.model) CHECK(tensor_name.find(".lora_") != std::string::npos);
  const auto config = ampt::commands::run_config(saved, {}, {});
  auto model = ampt::commands::load_run_model(config, saved, path, torch::kCPU);
  auto params = model.module->named_parameters();
  std::map<std::string, const ampt::models::LinearImpl*> seams;
  for (const auto& item : model.module->named_modules("", false)) {
    if (const auto* seam = dynamic_cast<const ampt::models::LinearImpl*>(item.value().get())) {
      seams[item.key() + ".weight"] = seam;
    }
  }
  for (const auto& [tensor_name, tensor] : ampt::models::pretrained_weights(config).tensors) {
    INFO(tensor_name);
    const auto seam = seams.find(tensor_name);
    if (base_dtype == "nf4" && seam != seams.end()) {
      REQUIRE(seam->second->quantized());
      const auto again = ampt::precision::dequantize_nf4(ampt::precision::quantize_nf4(tensor),
                                                         torch::kFloat);
      CHECK(torch::equal(seam->second->quantized()->dequantize(torch::kFloat), again));
    } else {
      CHECK(torch::equal(params[tensor_name], tensor));
    }
  }

  const auto exported = make_temp_dir();
  auto r = run_ampt(
      {"export", "--format", "peft", "--checkpoint", path, "--out", exported + "/peft"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  r = run_ampt({"export", "--format", "hf", "--merge", "--checkpoint", path, "--out",
                exported + "/merged"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const auto py = run_process({AMPT_PYTHON, kLora, "check", base.dir, exported + "/peft",
                               exported + "/merged", kPrompt, "10", "--base_dtype", base_dtype});
  INFO(py.err);
  REQUIRE(py.exit_code == 0);
  const auto result = YAML::Load(py.out);
  const auto prompt = torch::tensor({3, 14, 15, 92, 65, 35, 89, 79}).view({1, 8});
  torch::NoGradGuard no_grad;
  const auto logits = model.forward(prompt);
  const auto python = [&](const char* key) {
    return torch::tensor(result[key].as<std::vector<float>>()).view(logits.sizes());
  };
  // peft over a bitsandbytes 4-bit base computes as ampt does, each weight dequantized and one
  // fp32 GEMM (lora_reference.py's quantize_nf4), as does the merged model (the dequantized
  // weights with the adapters folded in).
  CHECK((logits - python("peft")).abs().max().item<double>() <= 1e-4);
  CHECK((logits - python("merged")).abs().max().item<double>() <= 1e-4);
  CHECK((logits - python("base")).abs().max().item<double>() > 1e-3);  // the adapters matter
  // What `ampt generate --init_from ADAPTER` loads: the base its adapter_config.json names, and
  // the exported adapters.
  const auto from_adapter = ampt::commands::load_run_model(
      ampt::commands::run_config(std::nullopt,
                                 {"--init_from", exported + "/peft", "--base_dtype", base_dtype,
                                  "--mixed_precision", "no"},
                                 {}),
      std::nullopt, "", torch::kCPU);
  CHECK((from_adapter.forward(prompt) - logits).abs().max().item<double>() <= 1e-5);
  ampt::models::SamplingOptions greedy;
  greedy.temperature = 0.0;
  greedy.max_new_tokens = 10;
  CHECK(ampt::models::generate(ampt::test::decoding(model), {3, 14, 15}, greedy) ==
        result["generated"].as<std::vector<int64_t>>());
}

// peft's adapter of a tiny `name` base (gpt2, qwen3 or qwen3-moe) continued by ampt for 20 AdamW
// steps at `lr` in fp32 against a PyTorch + peft loop over the same batch; then the checkpoint's
// exports in peft and, merged, in transformers.
void check_against_peft(const std::string& name, const std::string& lr = "1e-2") {
  const auto data = token_file();
  const auto base = make_base(name);
  const auto adapter = make_adapter(base);
  const auto out = make_temp_dir();
  auto r = train_from_adapter(adapter, data, out, "auto", lr);
  CHECK_THAT(r.out, Catch::Contains("[LoRA] rank 4, alpha 8 (scale 2)"));
  follows_peft(base, adapter, data, out, "auto", lr);
  check_exports(base, out, "auto");
}

}  // namespace

TEST_CASE("lora vs peft: GPT-2 (Conv1D, fan_in_fan_out) follows peft's loop, exports load in peft and merged",
          "[hf][lora][cli]") {
  if (!have_peft()) {
    AMPT_SKIP(reference, "skipping: transformers or peft is not installed in " AMPT_PYTHON);
  }
  check_against_peft("gpt2");
}

TEST_CASE("lora vs peft: a Llama-family base (Qwen3: GQA, q/k norms, wide heads) follows peft's "
          "loop, exports load in peft and merged",
          "[hf][lora][cli]") {
  if (!have_peft()) {
    AMPT_SKIP(reference, "skipping: transformers or peft is not installed in " AMPT_PYTHON);
  }
  check_against_peft("qwen3");
}

// peft's ParamWrapper: one adapter per expert group weight, A [r·E, in] and B [out, r·E], added
// to the weights; ampt names its factors after the weight and writes and reads peft's nesting.
TEST_CASE("lora vs peft: a Qwen3-MoE base with adapters on the experts (peft's target_parameters) "
          "follows peft's loop, exports load in peft and merged",
          "[hf][lora][moe][cli]") {
  if (!have_peft()) {
    AMPT_SKIP(reference, "skipping: transformers or peft is not installed in " AMPT_PYTHON);
  }
  // At 1e-2 a router's near-tie flips after 15 steps (both runs agree to 1e-7 until then, and by
  // 6e-4 at step 19); at 3e-3 they agree to 2e-7 over all 20.
  check_against_peft("qwen3-moe", "3e-3");
}

TEST_CASE("qlora vs peft + bitsandbytes: a Llama on an nf4 base follows peft's loop over a 4-bit "
          "base, from the first step's loss and gradients on, rows of 160 included",
          "[hf][lora][qlora][cli]") {
  if (!ampt::test::python_has("transformers, peft, bitsandbytes")) {
    AMPT_SKIP(reference, "skipping: transformers, peft or bitsandbytes is not installed in " AMPT_PYTHON);
  }
  const auto data = token_file();
  // Intermediate 160: down_proj [64, 160] has rows that are not a multiple of 64, across which
  // its nf4 blocks run. In shards of 60 kB, which the run quantizes one at a time as it reads
  // them.
  const Base base{"llama",
                  ampt::test::make_reference_model(
                      kLlama, {"--flavour", "llama", "--inter", "160", "--shard_kb", "60"}),
                  "q_proj,v_proj,down_proj"};
  REQUIRE(ampt::hf::model_files(base.dir).weights.size() > 2);
  const auto adapter = make_adapter(base);
  const auto out = make_temp_dir();
  const auto r = train_from_adapter(adapter, data, out, "nf4", "1e-2", /*save_every=*/"1");
  CHECK_THAT(r.out, Catch::Contains("with the block Linear weights in nf4 ("));
  // Both dequantize the same bytes to the same fp32 weights; what is left is the order of fp32
  // sums: each of the 20 losses measured within 1.4e-7 of peft's, relative (the first 4.8e-7
  // apart, a unit in the last place of 4.7), each first-step gradient within 6e-7 of its largest
  // value (AVX-512 and AVX2 alike; dividing the moment by 1 - beta1 rounds once more). Blocks
  // read per row instead move the first loss by 1.3e-3.
  const auto grads = make_temp_dir() + "/grads.safetensors";
  const auto losses = follows_peft(base, adapter, data, out, "nf4", "1e-2", 1e-6, grads);
  const auto first = ampt::checkpoint::load(out + "/ckpt-00000001.pt");
  std::map<std::string, torch::Tensor> moments(first.optimizer.begin(), first.optimizer.end());
  int adapters = 0;
  for (const auto& [name, grad] : ampt::checkpoint::read_safetensors(grads)) {
    INFO(name);
    ++adapters;
    // AdamW's first moment after one step from zero is (1 - beta1) times the gradient.
    const auto moment = moments.find(name + ".exp_avg");
    REQUIRE(moment != moments.end());
    const double largest = grad.abs().max().item<double>();
    CHECK((moment->second / 0.1 - grad).abs().max().item<double>() <= 2e-6 * largest);
  }
  CHECK(adapters == 12);  // A and B of q_proj, v_proj and down_proj in both blocks
  // The 4-bit base is not the fp32 one: the first loss moves by far more than the tolerance.
  const auto whole = make_temp_dir();
  const auto unquantized_run = train_from_adapter(adapter, data, whole, "auto");
  const auto unquantized = ampt::test::step_losses(ampt::test::read_file(whole + "/metrics.jsonl"));
  CHECK(std::abs(losses.front() - unquantized.front()) > 1e-3 * std::abs(unquantized.front()));
  // Both name the same base: the fingerprint of weights quantized as they load is taken from the
  // files' values.
  const std::regex fingerprint("base fingerprint ([0-9a-f]{16})");
  std::smatch quantized_match, whole_match;
  REQUIRE(std::regex_search(r.out, quantized_match, fingerprint));
  REQUIRE(std::regex_search(unquantized_run.out, whole_match, fingerprint));
  CHECK(quantized_match[1] == whole_match[1]);
  check_exports(base, out, "nf4");
  // Its adapters learnt the nf4 base's rounding: resuming them over another storage is refused.
  const auto resumed = run_ampt({"train", "--init_from", adapter, "--dataset", "tokens:" + data,
                                 "--block_size", "16", "--batch_size", "4", "--max_steps", "21",
                                 "--device", "cpu", "--output_dir", out, "--resume", "auto",
                                 "--base_dtype", "int8"});
  CHECK(resumed.exit_code != 0);
  CHECK_THAT(resumed.err, Catch::Contains(
      "holds LoRA adapters trained over its base stored as base_dtype nf4, and this run has "
      "base_dtype int8: resume with --base_dtype nf4"));
}
