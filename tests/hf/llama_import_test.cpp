// Llama, Qwen2, Qwen3 and Mistral models that transformers made (random weights, saved with
// save_pretrained) loaded with --init_from: the same logits, greedy tokens and fine-tuning losses
// as transformers', written back in a form transformers loads; bad files refused in one line.
#include "ampt/core/errors.h"
#include "ampt/hf/llama_config.h"
#include "ampt/hf/llama_export.h"
#include "ampt/hf/llama_weights.h"
#include "ampt/hf/pretrained.h"
#include "ampt/models/generation.h"
#include "ampt/models/catalog.h"
#include "ampt/models/gpt_presets.h"
#include "ampt/models/llama_presets.h"
#include "ampt/models/model_family.h"
#include "ampt/models/registry.h"
#include "support/decoding.h"
#include "support/pretrained_reference.h"
#include "support/process.h"
#include "support/skip.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

using ampt::test::check_against_transformers;
using ampt::test::have_transformers;
using ampt::test::make_temp_dir;
using ampt::test::run_ampt;
using ampt::test::run_process;

namespace {

constexpr const char* kLlamaModelScript = AMPT_SOURCE_DIR "/tests/hf/llama_reference.py";

std::string make_llama(const std::vector<std::string>& extra = {}) {
  return ampt::test::make_reference_model(kLlamaModelScript, extra);
}

ampt::models::Model load(const std::string& dir) {
  return ampt::test::load_reference_model(dir);
}

// The tiny models of each family the loops below check: Qwen3's heads twice as wide as
// hidden / heads (its q_proj wider than the model, as Qwen3-0.6B's), Mistral's untied.
const std::vector<std::vector<std::string>>& flavours() {
  static const std::vector<std::vector<std::string>> all = {
      {"--flavour", "llama"},
      {"--flavour", "qwen2"},
      {"--flavour", "qwen3", "--head_dim", "32", "--tied"},
      {"--flavour", "mistral"}};
  return all;
}

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& extra) {
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::vector<int64_t> reference_generation(const std::string& dir, const std::string& prompt, int n) {
  const auto r = run_process({AMPT_PYTHON, kLlamaModelScript, "generate", dir, prompt, std::to_string(n)});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return YAML::Load(r.out).as<std::vector<int64_t>>();
}

}  // namespace

TEST_CASE("llama import: logits and loss equal LlamaForCausalLM's (fp32), llama3 rope, untied head",
          "[hf][llama]") {
  if (!have_transformers()) {
    AMPT_SKIP(reference, "skipping: transformers is not installed in " AMPT_PYTHON);
  }
  const auto dir = make_llama({"--llama3"});
  CHECK(ampt::models::catalog().pretrained_model(dir, "") == "llama");
  check_against_transformers(dir);
}

TEST_CASE("llama import: Qwen2 (q/k/v biases, tied head, a sliding layer) from bf16 shards equals Qwen2ForCausalLM",
          "[hf][llama]") {
  if (!have_transformers()) {
    AMPT_SKIP(reference, "skipping: transformers is not installed in " AMPT_PYTHON);
  }
  // use_sliding_window from layer 1 on: layer 0 attends to all 12 positions, layer 1 to 5.
  const auto dir = make_llama({"--flavour", "qwen2", "--tied", "--shard_kb", "60", "--dtype", "bfloat16",
                               "--sliding_window", "5", "--max_window_layers", "1"});
  CHECK(ampt::models::catalog().pretrained_model(dir, "") == "qwen2");
  const auto config = ampt::hf::read_llama_config(dir + "/config.json");
  CHECK(config.window(0) == 0);
  CHECK(config.window(1) == 5);
  REQUIRE(ampt::hf::model_files(dir).weights.size() > 1);
  check_against_transformers(dir);
}

TEST_CASE("llama import: Qwen3 (q/k norms, wide heads, tied) and Mistral (a sliding window) equal transformers'",
          "[hf][llama]") {
  if (!have_transformers()) {
    AMPT_SKIP(reference, "skipping: transformers is not installed in " AMPT_PYTHON);
  }
  const auto qwen3 = make_llama(flavours()[2]);
  CHECK(ampt::models::catalog().pretrained_model(qwen3, "") == "qwen3");
  const auto config = ampt::hf::read_llama_config(qwen3 + "/config.json");
  CHECK(config.head_dim() == 32);
  CHECK(config.qk_norm);
  check_against_transformers(qwen3);
  const auto mistral = make_llama(with(flavours()[3], {"--sliding_window", "4"}));
  CHECK(ampt::models::catalog().pretrained_model(mistral, "") == "mistral");
  CHECK(ampt::hf::read_llama_config(mistral + "/config.json").window(1) == 4);
  check_against_transformers(mistral);
}

TEST_CASE("llama generate: greedy tokens through the KV cache (GQA) equal transformers'",
          "[hf][llama]") {
  if (!have_transformers()) {
    AMPT_SKIP(reference, "skipping: transformers is not installed in " AMPT_PYTHON);
  }
  // Llama's GQA and Qwen3's q/k norms and wide heads, its layer 1 sliding (20 new tokens after 4
  // past its window of 6, the cache's keys before it unread); Qwen2's biases and Mistral's config
  // differ only in the forward, which the import tests compare.
  const std::vector<std::string> window{"--sliding_window", "6", "--max_window_layers", "1"};
  for (const auto& flavour : {flavours()[0], with(flavours()[2], window)}) {
    INFO(flavour[1]);
    const auto dir = make_llama(with(flavour, {"--llama3"}));
    auto model = load(dir);
    ampt::models::SamplingOptions greedy;
    greedy.temperature = 0.0;
    greedy.max_new_tokens = 20;
    const auto produced =
        ampt::models::generate(ampt::test::decoding(model), {5, 17, 42, 9}, greedy);
    CHECK(produced == reference_generation(dir, "[5, 17, 42, 9]", 20));
  }
}

TEST_CASE("llama fine-tune: 20 AdamW steps follow a PyTorch + transformers loop (fp32)",
          "[hf][llama][cli]") {
  if (!have_transformers()) {
    AMPT_SKIP(reference, "skipping: transformers is not installed in " AMPT_PYTHON);
  }
  for (const auto& args : flavours()) {
    const auto& flavour = args[1];
    const auto dir = make_llama(with(args, {"--llama3"}));
    // Four windows of 16 + 1 tokens: one batch, the same every step (its order does not change
    // a mean loss).
    const auto data = make_temp_dir() + "/train.bin";
    {
      std::ofstream out(data, std::ios::binary);
      for (int i = 0; i < 65; ++i) {
        const uint16_t token = static_cast<uint16_t>((i * 37 + i * i) % 100);
        out.write(reinterpret_cast<const char*>(&token), 2);
      }
    }
    const auto out = make_temp_dir();
    const auto r = run_ampt({"train", "--init_from", dir, "--dataset", "tokens:" + data,
                             "--block_size", "16", "--batch_size", "4", "--val_fraction", "0",
                             "--max_steps", "20", "--lr", "3e-3", "--warmup_steps", "0",
                             "--min_lr_ratio", "1", "--weight_decay", "0", "--max_grad_norm", "0",
                             "--adam_beta1", "0.9", "--adam_beta2", "0.95", "--adam_eps", "1e-8",
                             "--mixed_precision", "no", "--log_every", "1", "--device", "cpu",
                             "--output_dir", out});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    const auto reference = run_process({AMPT_PYTHON, kLlamaModelScript, "finetune", dir, data, "16", "20",
                                        "3e-3", "0.9", "0.95", "1e-8"});
    INFO(reference.err);
    REQUIRE(reference.exit_code == 0);
    const auto expected = YAML::Load(reference.out).as<std::vector<double>>();
    std::vector<double> losses;
    std::ifstream metrics(out + "/metrics.jsonl");
    for (std::string line; std::getline(metrics, line);) {
      const auto record = YAML::Load(line);
      if (record["step"] && record["loss"] && !record["event"]) losses.push_back(record["loss"].as<double>());
    }
    REQUIRE(losses.size() == expected.size());
    for (std::size_t i = 0; i < losses.size(); ++i) {
      INFO(flavour << " step " << i + 1 << ": ampt " << losses[i] << ", transformers " << expected[i]);
      CHECK(std::abs(losses[i] - expected[i]) <= 1e-4 * std::abs(expected[i]));
    }
    CHECK(losses.back() < losses.front() - 0.5);  // it learns the batch
  }
}

namespace {

// The tiny model `args` makes, trained 3 steps and exported with --format hf: transformers reads
// the trained weights, with ampt's logits and greedy tokens.
void check_export(const std::vector<std::string>& args) {
  const auto dir = make_llama(args);
  const auto out = make_temp_dir();
  auto r = run_ampt({"train", "--init_from", dir, "--max_steps", "3", "--batch_size", "4",
                     "--block_size", "16", "--synthetic_samples", "64", "--mixed_precision", "no",
                     "--device", "cpu", "--save_every", "3", "--output_dir", out});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::string checkpoint;
  for (const auto& entry : std::filesystem::directory_iterator(out)) {
    if (entry.path().filename().string().starts_with("ckpt-")) checkpoint = entry.path().string();
  }
  REQUIRE(!checkpoint.empty());
  const auto exported = make_temp_dir() + "/finetuned";
  r = run_ampt({"export", "--format", "hf", "--checkpoint", checkpoint, "--out", exported});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::StartsWith("wrote " + exported + ": model.safetensors, config.json"));
  const auto written = ampt::hf::read_llama_config(exported + "/config.json");
  CHECK(written.flavour == args[1]);
  const auto original = ampt::hf::read_llama_config(dir + "/config.json");
  CHECK(written.sliding_window == original.sliding_window);
  CHECK(written.sliding_layers == original.sliding_layers);
  CHECK(written.eos_token_ids == std::vector<int64_t>{1});

  // The exported weights are the trained ones, not the pretrained ones: compare with the checkpoint
  // through ampt's own loader of the export, then transformers' logits of the export.
  auto model = load(exported);
  const auto tokens = torch::tensor({3, 14, 15, 92, 65, 35, 89, 79}).view({1, 8});
  torch::NoGradGuard no_grad;
  const auto logits = model.forward(tokens);
  const auto py = run_process({AMPT_PYTHON, kLlamaModelScript, "logits", exported, "[[3, 14, 15, 92, 65, 35, 89, 79]]"});
  INFO(py.err);
  REQUIRE(py.exit_code == 0);
  const auto expected = torch::tensor(YAML::Load(py.out).as<std::vector<float>>()).view(logits.sizes());
  CHECK((logits - expected).abs().max().item<double>() <= 1e-4);
  const auto pretrained_logits = load(dir).forward(tokens);
  CHECK((logits - pretrained_logits).abs().max().item<double>() > 1e-3);  // it trained
  ampt::models::SamplingOptions greedy;
  greedy.temperature = 0.0;
  greedy.max_new_tokens = 12;
  CHECK(ampt::models::generate(ampt::test::decoding(model), {3, 14, 15}, greedy) ==
        reference_generation(exported, "[3, 14, 15]", 12));
}

}  // namespace

TEST_CASE("llama export: --format hf loads in transformers with ampt's logits and greedy tokens",
          "[hf][llama][cli]") {
  if (!have_transformers()) {
    AMPT_SKIP(reference, "skipping: transformers is not installed in " AMPT_PYTHON);
  }
  // A tied Qwen2 (biases) whose layer 1 slides over 3 positions (trained on 16, compared on 8)
  // and a Qwen3 (q/k norms, head_dim). Mistral's config.json differs only in its window key.
  for (const auto& args : {std::vector<std::string>{"--flavour", "qwen2", "--tied", "--sliding_window", "3",
                                                    "--max_window_layers", "1"},
                           flavours()[2]}) {
    INFO(args[1]);
    check_export(args);
  }
}

TEST_CASE("llama import: a config, shard or index that does not fit is one line naming file and field",
          "[hf][llama]") {
  const auto dir = make_temp_dir();
  const auto path = dir + "/config.json";
  const std::string dims =
      R"("model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, )"
      R"("num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64, "vocab_size": 100)";
  const auto refuse = [&](const std::string& extra, const std::string& message) {
    ampt::test::write_file(path, "{" + dims + extra + "}");
    CHECK_THROWS_WITH(ampt::hf::read_llama_config(path), path + ": " + message);
  };
  const std::string no_window =
      ": a llama model has no sliding window; mistral, mixtral, qwen2, qwen3 and qwen3_moe models have one";
  refuse(R"(, "use_sliding_window": true)", "use_sliding_window is true" + no_window);
  refuse(R"(, "rope_scaling": {"rope_type": "yarn", "factor": 4.0})",
         "rope_type yarn is not one ampt's Llama implements (default or llama3)");
  refuse(R"(, "num_local_experts": 8)",
         "num_local_experts is set: ampt builds experts for qwen3_moe and mixtral models, not "
         "model_type llama");
  refuse(R"(, "hidden_act": "gelu")", "hidden_act gelu is not the SwiGLU activation ampt's Llama has (silu)");
  refuse(R"(, "layer_types": ["full_attention", "sliding_attention"])", "layer_types holds sliding_attention" + no_window);
  refuse(R"(, "head_dim": 31)", "the head dimension 31 is odd: rotary embeddings rotate pairs");
  refuse(R"(, "sliding_window": 4096)", "sliding_window is 4096" + no_window);
  refuse(R"(, "mlp_bias": true)", "mlp_bias is true: ampt's Llama MLP has no biases");
  ampt::test::write_file(path, R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, )"
                               R"("num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 3, )"
                               R"("max_position_embeddings": 64, "vocab_size": 100})");
  CHECK_THROWS_WITH(ampt::hf::read_llama_config(path),
                    path + ": num_attention_heads 4 is not a multiple of num_key_value_heads 3");
  ampt::test::write_file(path, R"({"model_type": "gemma"})");
  CHECK_THROWS_WITH(ampt::hf::read_llama_config(path),
                    path + ": model_type is gemma, ampt's Llama loads llama, qwen2, qwen3, "
                           "mistral, qwen3_moe and mixtral models");
  CHECK_THROWS_WITH(ampt::models::catalog().pretrained_model(dir, ""),
                    path + ": model_type is gemma; ampt loads gpt2, llama, mistral, mixtral, "
                           "qwen2, qwen3 and qwen3_moe models");
  // The hub's older spelling of llama3 rope settings reads as transformers 5's.
  ampt::test::write_file(path, "{" + dims + R"(, "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}})");
  const auto read = ampt::hf::read_llama_config(path);
  CHECK(read.rope_theta == 500000.0);
  REQUIRE(read.rope_llama3);
  CHECK(read.rope_llama3->factor == 32.0);

  if (!have_transformers()) {
    AMPT_SKIP(reference, "skipping the weight files' half: transformers is not installed in " AMPT_PYTHON);
  }
  const auto sharded = make_llama({"--shard_kb", "60"});
  const auto files = ampt::hf::model_files(sharded);
  REQUIRE(files.weights.size() > 1);
  // An index naming a tensor its shard does not hold.
  const auto index = ampt::test::read_file(files.index);
  const auto renamed = std::string(index).replace(index.find("model.norm.weight"), 17, "model.norm.weigh");
  ampt::test::write_file(files.index, renamed);
  CHECK_THROWS_WITH(ampt::hf::read_model_tensors(ampt::hf::model_files(sharded)),
                    Catch::Matches(files.index + ": names tensor model.norm.weigh in .*model-0000.-of-0000.\\.safetensors, "
                                   "which does not hold it"));
  ampt::test::write_file(files.index, index);
  // A shard the index lists that is not there.
  std::filesystem::remove(files.weights.back());
  CHECK_THROWS_WITH(ampt::hf::model_files(sharded),
                    files.weights.back() + ": missing, but " + files.index + " lists it");
  // A tensor of the wrong shape, and one the model lacks.
  const auto single = make_llama();
  auto config = ampt::hf::read_llama_config(single + "/config.json");
  config.intermediate = 96;
  // The first misfit in the file's order, where reading stops.
  CHECK_THROWS_WITH(ampt::hf::read_llama_weights(ampt::hf::model_files(single), config,
                                                   ampt::models::declared_linears(config)),
                    single + "/model.safetensors: tensor model.layers.0.mlp.down_proj.weight has "
                             "shape [64, 128], config.json's dimensions give [64, 96]");
  config.intermediate = 128;
  config.n_layer = 3;
  CHECK_THROWS_WITH(ampt::hf::read_llama_weights(ampt::hf::model_files(single), config,
                                                   ampt::models::declared_linears(config)),
                    single + "/model.safetensors: no tensor model.layers.2.input_layernorm.weight "
                             "(a Llama of 3 layers has one)");
}

TEST_CASE("llama presets: parameter counts equal the published ones, and the built model's",
          "[models][llama]") {
  for (const auto& preset : ampt::models::llama_presets()) {
    if (preset.published > 0) {
      INFO(preset.name);
      CHECK(preset.dims.parameters() == preset.published);
      // With experts, what one token computes with; without, all of them.
      CHECK(preset.dims.active_parameters() ==
            (preset.published_active > 0 ? preset.published_active : preset.published));
    }
  }
  for (const auto* name : {"llama", "qwen2", "qwen3", "mistral", "qwen3-moe", "mixtral"}) {
    INFO(name);
    ampt::config::Config config;
    config.model = name;
    const auto dims = ampt::models::resolve_llama_dims(config);
    auto model = ampt::models::make_model(config, {ampt::data::Task::language_model, {16}, 256});
    CHECK(ampt::models::parameter_count(*model.module) == dims.parameters());
  }
}

TEST_CASE("llama config: every preset's architecture reads back from the config.json ampt writes",
          "[hf][llama][models]") {
  using ampt::hf::LlamaConfig;
  std::vector<std::pair<std::string, LlamaConfig>> cases;
  for (const auto& preset : ampt::models::llama_presets()) {
    cases.emplace_back(preset.name, LlamaConfig{preset.dims, std::nullopt, {}});
  }
  // What no preset has: Llama's attention_bias (q/k/v and o), a Qwen3-MoE of sparse_step 2 with
  // dense layers, released special tokens (one eos id, and a list).
  LlamaConfig biased{ampt::models::llama_presets().front().dims, 128000, {128001}};
  biased.qkv_bias = biased.o_bias = true;
  cases.emplace_back("llama with attention_bias", biased);
  auto moe = std::ranges::find(cases, "qwen3-moe", &decltype(cases)::value_type::first)->second;
  moe.n_layer = 4;
  moe.moe.sparse_step = 2;
  moe.moe.dense_layers = {3};
  moe.moe.normalize_top_k = false;
  moe.moe.aux_loss_coef = 0.02;
  moe.eos_token_ids = {1, 2};
  cases.emplace_back("qwen3_moe with dense layers", moe);
  // Sliding windows: over every layer, and Qwen's by layer (the first layer full; the last).
  const auto windowed = [&](const std::string& preset, int64_t window, std::vector<bool> layers) {
    auto c = std::ranges::find(cases, preset, &decltype(cases)::value_type::first)->second;
    c.sliding_window = window;
    c.sliding_layers = std::move(layers);
    cases.emplace_back(preset + " with a sliding window", c);
  };
  windowed("mistral", 4096, {});
  windowed("mixtral", 64, {});
  windowed("qwen3-moe", 128, {});
  windowed("qwen3", 512, {});
  windowed("qwen2", 7, {false, true});
  auto last = std::ranges::find(cases, "qwen3-0.6b", &decltype(cases)::value_type::first)->second;
  last.sliding_window = 1024;
  last.sliding_layers.assign(static_cast<size_t>(last.n_layer), false);
  last.sliding_layers.back() = true;
  cases.emplace_back("qwen3-0.6b sliding in its last layer", last);

  const auto path = ampt::test::make_temp_dir() + "/config.json";
  for (const auto& [name, written] : cases) {
    const auto json = ampt::hf::llama_config_json(written);
    INFO(name << ":\n" << json);
    ampt::test::write_file(path, json);
    const auto read = ampt::hf::read_llama_config(path);
    INFO("reads back as:\n" << ampt::hf::llama_config_json(read));
    // config.json spells head_dim out: a width of 0 (n_embd / n_head) reads back as that width.
    ampt::hf::LlamaArchitecture expected = written;
    expected.head_size = written.head_dim();
    CHECK(static_cast<const ampt::hf::LlamaArchitecture&>(read) == expected);
    CHECK(read.bos_token_id == written.bos_token_id);
    CHECK(read.eos_token_ids == written.eos_token_ids);
  }
}

TEST_CASE("llama config: sliding windows read as transformers' config classes read them",
          "[hf][llama]") {
  const auto path = ampt::test::make_temp_dir() + "/config.json";
  const auto read = [&](const std::string& type, const std::string& extra) {
    ampt::test::write_file(path, R"({"model_type": ")" + type + R"(", "hidden_size": 64, )"
                                 R"("intermediate_size": 128, "num_hidden_layers": 3, "num_attention_heads": 4, )"
                                 R"("max_position_embeddings": 64, "vocab_size": 100)" + extra + "}");
    const auto c = ampt::hf::read_llama_config(path);
    return std::vector<int64_t>{c.window(0), c.window(1), c.window(2)};
  };
  using Windows = std::vector<int64_t>;
  // MistralConfig's window is 4096 unless the file says null; Mixtral's none unless given.
  CHECK(read("mistral", "") == Windows{4096, 4096, 4096});
  CHECK(read("mistral", R"(, "sliding_window": null)") == Windows{0, 0, 0});
  CHECK(read("mistral", R"(, "sliding_window": 8)") == Windows{8, 8, 8});
  // Qwen's window only with use_sliding_window, from max_window_layers (28 unless given) on, or
  // where layer_types says.
  CHECK(read("qwen2", R"(, "sliding_window": 8)") == Windows{0, 0, 0});
  CHECK(read("qwen2", R"(, "use_sliding_window": true, "sliding_window": 8)") == Windows{0, 0, 0});
  CHECK(read("qwen2", R"(, "use_sliding_window": true, "max_window_layers": 1)") == Windows{0, 4096, 4096});
  CHECK(read("qwen3", R"(, "use_sliding_window": true, "sliding_window": 8, "layer_types": )"
                      R"(["sliding_attention", "full_attention", "sliding_attention"])") == Windows{8, 0, 8});
  CHECK_THROWS_WITH(read("qwen2", R"(, "use_sliding_window": true, "layer_types": ["full_attention"])"),
                    path + ": layer_types is not a list of the 3 layers' types");
  CHECK_THROWS_WITH(
      read("qwen2", R"(, "use_sliding_window": true, "layer_types": ["full_attention", "chunked_attention", "full_attention"])"),
      path + ": layer_types holds chunked_attention: sliding_attention and full_attention are allowed");
  CHECK_THROWS_WITH(read("mistral", R"(, "sliding_window": 0)"), path + ": sliding_window is 0, not a positive size");

  // --sliding_window on a preset: every layer, on a family that has one, within the context.
  ampt::config::Config preset;
  preset.model = "mistral";
  preset.sliding_window = 8;
  CHECK(ampt::models::resolve_llama_dims(preset).window(1) == 8);
  preset.sliding_window = 100;
  CHECK_THROWS_WITH(ampt::models::resolve_llama_dims(preset),
                    "sliding_window 100 exceeds model mistral's context of 64 positions (block_size): a "
                    "window that long is full attention; give 0 or a window of at most 64");
  preset.model = "llama";
  preset.sliding_window = 8;
  CHECK_THROWS_WITH(ampt::models::resolve_llama_dims(preset),
                    "sliding_window 8 with model llama: a llama model has no sliding window (transformers' "
                    "LlamaForCausalLM); mistral, mixtral, qwen2, qwen3 and qwen3-moe have one");
  preset.model = "gpt";
  CHECK_THROWS_WITH(ampt::models::resolve_gpt_dims(preset),
                    "sliding_window 8 with model gpt: GPT-2's attention has no window; the Llama "
                    "family's mistral, qwen2 and qwen3 presets have one");
}

TEST_CASE("llama export: weights past the shard size go to shards and an index transformers reads",
          "[hf][llama]") {
  if (!have_transformers()) {
    AMPT_SKIP(reference, "skipping: transformers is not installed in " AMPT_PYTHON);
  }
  const auto dir = make_llama({"--llama3"});
  const auto config = ampt::hf::read_llama_config(dir + "/config.json");
  const auto linears = ampt::models::declared_linears(config);
  const auto weights = ampt::hf::read_llama_weights(ampt::hf::model_files(dir), config, linears);
  const auto out = make_temp_dir() + "/sharded";
  const auto written = ampt::hf::write_llama_directory(out, weights, config, linears, nullptr, {}, 60'000);
  REQUIRE(written.size() > 3);
  CHECK(written.front() == "model-00001-of-0000" + std::to_string(written.size() - 2) + ".safetensors");
  CHECK(written[written.size() - 2] == "model.safetensors.index.json");
  CHECK(ampt::hf::model_files(out).weights.size() == written.size() - 2);
  // transformers' logits of the sharded export are those of the model it came from.
  const auto reference = YAML::LoadFile(dir + "/reference.json");
  std::vector<std::string> rows;
  for (auto row : reference["tokens"].as<std::vector<std::vector<int64_t>>>()) {
    row.pop_back();  // reference.json's logits are of the inputs: all but the last token
    rows.push_back(fmt::format("[{}]", fmt::join(row, ", ")));
  }
  const auto py = run_process({AMPT_PYTHON, kLlamaModelScript, "logits", out, fmt::format("[{}]", fmt::join(rows, ", "))});
  INFO(py.err);
  REQUIRE(py.exit_code == 0);
  const auto logits = torch::tensor(YAML::Load(py.out).as<std::vector<float>>());
  const auto expected = torch::tensor(reference["logits"].as<std::vector<float>>());
  REQUIRE(logits.numel() == expected.numel());
  CHECK((logits - expected).abs().max().item<double>() <= 1e-5);
}
