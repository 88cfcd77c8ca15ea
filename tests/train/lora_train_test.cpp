// LoRA runs as whole programs: checkpoints that hold only the adapters and resume exactly onto
// the same base and never another, the frozen base held in the compute dtype, O2 and fp16's
// scaler, activation checkpointing, and ZeRO on Gloo ranks (stage 3 with bf16 and nf4 bases, and
// a sparse model's experts in nf4).
#include "ampt/checkpoint/checkpoint.h"
#include "ampt/commands/run_model.h"
#include "ampt/hf/llama_config.h"
#include "ampt/hf/llama_weights.h"
#include "ampt/models/llama_presets.h"
#include "ampt/hf/pretrained.h"
#include "ampt/models/quantizable.h"
#include "ampt/precision/nf4.h"
#include "distributed/rank_processes.h"
#include "support/json_field.h"
#include "support/process.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

using namespace ampt::test;

namespace {

// A tiny random GPT with rank-4 adapters on c_attn and c_proj.
const std::vector<std::string> kGpt{"--model", "gpt", "--n_layer", "2", "--n_embd", "32",
                                    "--n_head", "4", "--block_size", "16", "--vocab_size", "64",
                                    "--lora_targets", "c_attn,c_proj"};

// Six steps of rank-4 adapters on `model`; `extra` flags come last.
std::vector<std::string> lora_args(const std::string& out, std::vector<std::string> extra = {},
                                   const std::vector<std::string>& model = kGpt) {
  std::vector<std::string> args{"train"};
  args.insert(args.end(), model.begin(), model.end());
  args.insert(args.end(), {"--synthetic_samples", "256", "--batch_size", "8", "--lora_rank", "4",
                           "--lr", "1e-2", "--warmup_steps", "0", "--max_steps", "6",
                           "--log_every", "1", "--loader_workers", "0", "--device", "cpu",
                           "--seed", "3", "--output_dir", out});
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

torch::Tensor saved_tensor(const ampt::checkpoint::Checkpoint& saved, const std::string& name) {
  for (const auto& [tensor_name, tensor] : saved.model) {
    if (tensor_name == name) return tensor;
  }
  FAIL("no tensor " << name);
  return {};
}

std::vector<double> losses(const std::string& dir) {
  return step_losses(read_file(dir + "/metrics.jsonl"));
}

ProcessResult train_lora(const std::vector<std::string>& args) {
  auto r = run_ampt(args);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return r;
}

}  // namespace

TEST_CASE("lora train: checkpoints hold the adapters, resume exactly, and refuse another base",
          "[train][lora][cli][checkpoint]") {
  const auto dir = make_temp_dir();
  const auto whole = train_lora(lora_args(dir + "/whole", {"--mixed_precision", "no", "--save_every", "3"}));
  CHECK_THAT(whole.out, Catch::Contains("[LoRA] rank 4, alpha 16 (scale 4), dropout 0 on 6 Linear "
                                        "layers (c_attn,c_proj): 2816 trainable parameters with "
                                        "fp32 masters"));
  CHECK_THAT(whole.out, Catch::Contains("frozen in Float"));
  const auto midway = dir + "/whole/ckpt-00000003.pt";
  const auto saved = ampt::checkpoint::load(midway);
  // A and B of c_attn, attn.c_proj and mlp.c_proj in 2 layers, nothing of the base.
  REQUIRE(saved.model.size() == 12);
  for (const auto& [name, tensor] : saved.model) CHECK(name.find(".lora_") != std::string::npos);
  CHECK(saved.base_model.empty());  // a random base: the seed makes it again
  CHECK(saved.base_fingerprint.size() == 16);
  const auto full = losses(dir + "/whole");
  REQUIRE(full.size() == 6);
  CHECK(full.back() < full.front());

  SECTION("a resume continues bit for bit") {
    train_lora(lora_args(dir + "/resumed", {"--mixed_precision", "no", "--resume", midway}));
    const auto resumed = losses(dir + "/resumed");
    REQUIRE(resumed.size() == 3);
    for (int i = 0; i < 3; ++i) CHECK(resumed[i] == full[3 + i]);
  }
  SECTION("another base, no LoRA, or a full model's checkpoint is one line") {
    auto r = run_ampt(lora_args(dir + "/other", {"--mixed_precision", "no", "--seed", "4",
                                                 "--resume", midway}));
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, Catch::Contains("holds LoRA adapters trained on a random base (fingerprint " +
                                      saved.base_fingerprint + "), and this run's a random base "
                                      "has fingerprint"));
    r = run_ampt(lora_args(dir + "/full", {"--mixed_precision", "no", "--lora_rank", "0",
                                           "--resume", midway}));
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, Catch::Contains("holds LoRA adapters trained on a random base: load it with "
                                      "its --lora_rank and --init_from"));
    train_lora(lora_args(dir + "/plain", {"--mixed_precision", "no", "--lora_rank", "0",
                                     "--max_steps", "1", "--save_every", "1"}));
    r = run_ampt(lora_args(dir + "/onto", {"--mixed_precision", "no", "--resume",
                                           dir + "/plain/ckpt-00000001.pt"}));
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, Catch::Contains("holds a full model, not LoRA adapters"));
  }
  SECTION("export: --format hf needs --merge, peft needs adapters") {
    auto r = run_ampt({"export", "--format", "hf", "--checkpoint", midway, "--out", dir + "/hf"});
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, Catch::Contains("holds LoRA adapters only: --format peft writes them for "
                                      "peft, --format hf --merge folds them into their base"));
    r = run_ampt({"export", "--format", "peft", "--merge", "--checkpoint", midway, "--out", dir + "/p"});
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, Catch::Contains("--merge writes the whole model"));
  }
}

TEST_CASE("lora train: a half-precision base, O2 with fp16's scaler, activation checkpointing",
          "[train][lora][cli]") {
  // Per case: B starts at zero, so that the first step's loss is the base model's, bit for bit
  // (a run without adapters, the same seed, its weights held as the frozen base is: O2's half
  // working weights, norms in fp32; O1's fp32 weights move the bf16 loss by 1.5e-5); the
  // checkpoints hold the adapters alone, which moved from zero; and a resume, whose base is made
  // again from the seed, continues bit for bit, which it could not had the base changed.
  const auto dir = make_temp_dir();
  struct Case {
    std::vector<std::string> flags;
    std::string base_dtype;
    std::vector<std::string> base_flags;
  };
  const std::vector<Case> cases = {
      {{"--mixed_precision", "bf16"}, "BFloat16", {"--mixed_precision", "bf16", "--amp_opt_level", "O2"}},
      {{"--mixed_precision", "fp16", "--amp_opt_level", "O2", "--grad_ckpt"}, "Half",
       {"--mixed_precision", "fp16", "--amp_opt_level", "O2", "--grad_ckpt"}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO(cases[i].base_dtype);
    const auto out = fmt::format("{}/run{}", dir, i);
    auto flags = cases[i].flags;
    flags.insert(flags.end(), {"--max_steps", "4", "--save_every", "2"});
    const auto r = train_lora(lora_args(out, flags));
    CHECK_THAT(r.out, Catch::Contains("frozen in " + cases[i].base_dtype));
    if (i == 1) CHECK_THAT(r.out, Catch::Contains("[AMP] GradScaler: on"));
    const auto run = losses(out);
    REQUIRE(run.size() == 4);

    auto plain = cases[i].base_flags;
    plain.insert(plain.end(), {"--lora_rank", "0", "--max_steps", "1"});
    train_lora(lora_args(out + "-base", plain));
    const auto base = losses(out + "-base");
    REQUIRE(base.size() == 1);
    CHECK(run[0] == base[0]);

    const auto saved = ampt::checkpoint::load(out + "/ckpt-00000002.pt");
    int64_t trainable = 0;
    for (const auto& [name, tensor] : saved.model) {
      INFO(name);
      CHECK(name.find(".lora_") != std::string::npos);
      CHECK(tensor.scalar_type() == torch::kFloat);
      if (name.find(".lora_B.") != std::string::npos) CHECK(tensor.abs().max().item<double>() > 0.0);
      trainable += tensor.numel();
    }
    // Rank 4 on c_attn (32 -> 96), attn.c_proj (32 -> 32) and mlp.c_proj (128 -> 32), in 2
    // layers: A is [4, in], B [out, 4].
    CHECK(trainable == 2 * 4 * ((32 + 96) + (32 + 32) + (128 + 32)));
    CHECK_THAT(r.out, Catch::Contains(fmt::format(": {} trainable parameters with fp32 masters",
                                                  trainable)));

    auto again = flags;
    again.insert(again.end(), {"--resume", out + "/ckpt-00000002.pt"});
    train_lora(lora_args(out + "-resumed", again));
    const auto resumed = losses(out + "-resumed");
    REQUIRE(resumed.size() == 2);
    CHECK(resumed[0] == run[2]);
    CHECK(resumed[1] == run[3]);
  }
}

TEST_CASE("lora train: a base stored in fp8, bf16 or int8 under fp32 compute trains, and says so",
          "[train][lora][qlora][cli]") {
  // Each stored format is dequantized to fp32 where its GEMM runs; the adapters learn over it.
  // The same seed: the runs differ by their base's rounding only, which fp8's and int8's move
  // the first loss by (bf16's too, by less).
  const auto dir = make_temp_dir();
  std::map<std::string, std::vector<double>> runs;
  for (const std::string format : {"auto", "fp8", "bf16", "int8"}) {
    INFO(format);
    const auto out = dir + "/" + format;
    const auto r = train_lora(lora_args(out, {"--mixed_precision", "no", "--base_dtype", format}));
    if (format != "auto") {
      CHECK_THAT(r.out, Catch::Contains("with the block Linear weights in " + format + " ("));
    }
    runs[format] = losses(out);
    REQUIRE(runs[format].size() == 6);
    CHECK(runs[format].back() < runs[format].front());
  }
  for (const std::string format : {"fp8", "bf16", "int8"}) {
    INFO(format);
    CHECK(runs[format].front() != runs["auto"].front());
    CHECK(runs[format].front() == Approx(runs["auto"].front()).epsilon(1e-2));
  }
}

TEST_CASE("lora train: ZeRO 2 on 2 Gloo ranks trains the adapters like plain data parallelism",
          "[train][lora][dist][cli]") {
  const auto dir = make_temp_dir();
  std::vector<std::vector<double>> runs;
  for (const int stage : {0, 2}) {
    const auto out = fmt::format("{}/stage{}", dir, stage);
    auto args = lora_args(out, {"--mixed_precision", "no", "--batch_size", "4", "--zero_stage",
                                std::to_string(stage), "--dist_timeout", "30"});
    args.insert(args.begin(), AMPT_BINARY);
    const auto run = run_rank_processes(2, args, out + "-logs");
    for (size_t r = 0; r < run.status.size(); ++r) {
      INFO("rank " << r << "\n" << run.out[r] << run.err[r]);
      REQUIRE(run.status[r] == 0);
    }
    runs.push_back(losses(out));
  }
  REQUIRE(runs[0].size() == 6);
  REQUIRE(runs[1].size() == 6);
  for (size_t i = 0; i < 6; ++i) CHECK(runs[1][i] == Approx(runs[0][i]).epsilon(1e-6));
}

namespace {

struct RanksRun {
  std::vector<double> losses;
  std::string log;  // rank 0's standard output
};

// `ranks` Gloo ranks of lora_args(dir/out, extra, model).
RanksRun on_ranks(int ranks, const std::string& dir, const std::string& out,
                  std::vector<std::string> extra, const std::vector<std::string>& model = kGpt) {
  extra.insert(extra.end(), {"--dist_timeout", "30"});
  auto args = lora_args(dir + "/" + out, extra, model);
  args.insert(args.begin(), AMPT_BINARY);
  const auto run = run_rank_processes(ranks, args, dir + "/" + out + "-logs");
  for (size_t r = 0; r < run.status.size(); ++r) {
    INFO("rank " << r << "\n" << run.out[r] << run.err[r]);
    REQUIRE(run.status[r] == 0);
  }
  return {losses(dir + "/" + out), run.out[0]};
}

void check_same(const std::vector<double>& run, const std::vector<double>& reference,
                double tolerance) {
  REQUIRE(run.size() == reference.size());
  for (size_t i = 0; i < run.size(); ++i) {
    INFO("step " << i + 1 << ": " << run[i] << " against " << reference[i]);
    CHECK(std::abs(run[i] - reference[i]) <= tolerance * std::abs(reference[i]));
  }
}

}  // namespace

TEST_CASE("lora train: ZeRO 3 shards the frozen base as bytes and trains like stage 0",
          "[train][lora][qlora][dist][zero3][cli]") {
  // The same global batch of 8 on every run; a reduce-scatter sums the gradients in another
  // order than an all-reduce, which moves fp32 losses by about 1e-7.
  const auto dir = make_temp_dir();
  SECTION("a bf16 base on 2 ranks") {
    // Stage 0 held to stage 3's arithmetic: ATen's ops (stage 3 steps its shards with ATen's
    // AdamW, not the fused kernel) and the adapters' weight gradients as autocast makes them;
    // otherwise bf16's rounding turns the last-bit differences into up to 1e-4 of the losses.
    const std::vector<std::string> bf16{"--mixed_precision", "bf16", "--batch_size", "4",
                                        "--fp32_weight_grads=false", "--fused_kernels=false"};
    auto zero3 = bf16;
    zero3.insert(zero3.end(), {"--zero_stage", "3"});
    const auto sharded = on_ranks(2, dir, "bf16-3", zero3);
    CHECK_THAT(sharded.log, Catch::Contains("the frozen base's bytes, in their storage form, are "
                                            "sharded too: this rank keeps"));
    check_same(sharded.losses, on_ranks(2, dir, "bf16-0", bf16).losses, 1e-5);
  }
  SECTION("an nf4 base on 4 ranks") {
    const std::vector<std::string> nf4{"--mixed_precision", "no", "--batch_size", "2",
                                       "--base_dtype", "nf4"};
    auto zero3 = nf4;
    zero3.insert(zero3.end(), {"--zero_stage", "3"});
    check_same(on_ranks(4, dir, "nf4-3", zero3).losses, on_ranks(4, dir, "nf4-0", nf4).losses,
               1e-5);
  }
  SECTION("an nf4 base resumes 3 -> 0 and 0 -> 3") {
    const auto flags = [](const std::string& stage, const std::string& flag,
                          const std::string& value) {
      return std::vector<std::string>{"--mixed_precision", "no", "--batch_size", "4",
                                      "--base_dtype", "nf4", "--zero_stage", stage, flag, value};
    };
    const auto three = on_ranks(2, dir, "three", flags("3", "--save_every", "3")).losses;
    const auto zero = on_ranks(2, dir, "zero", flags("0", "--save_every", "3")).losses;
    check_same(three, zero, 1e-5);
    const auto tail = [](const std::vector<double>& run) {
      return std::vector<double>(run.end() - 3, run.end());
    };
    check_same(
        on_ranks(2, dir, "from3", flags("0", "--resume", dir + "/three/ckpt-00000003")).losses,
        tail(three), 1e-5);
    check_same(
        on_ranks(2, dir, "from0", flags("3", "--resume", dir + "/zero/ckpt-00000003.pt")).losses,
        tail(zero), 1e-5);
  }
}

TEST_CASE("lora train: a sparse model's experts stored in nf4 load from Hugging Face files, take "
          "adapters, shard under ZeRO 3 like stage 0, and export merged",
          "[train][lora][qlora][moe][dist][zero3][cli]") {
  // The base: a random Qwen3-MoE after one step, in Hugging Face's per-expert layout, which the
  // LoRA runs load expert by expert into nf4 storage (never whole in fp32).
  const auto dir = make_temp_dir();
  const std::vector<std::string> tiny{"--model", "qwen3-moe", "--block_size", "16"};
  auto base = lora_args(dir + "/base", {"--lora_rank", "0", "--max_steps", "1"}, tiny);
  train_lora(base);
  auto r = run_ampt({"export", "--format", "hf", "--checkpoint", dir + "/base/ckpt-00000001.pt",
                     "--out", dir + "/hf"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);

  // Adapters on attention (the default) and on the experts' down_proj, over their nf4 storage.
  auto moe = tiny;
  moe.insert(moe.end(), {"--init_from", dir + "/hf", "--lora_target_parameters",
                         "mlp.experts.down_proj"});
  const std::vector<std::string> nf4{"--mixed_precision", "no", "--batch_size", "4",
                                     "--base_dtype", "nf4"};
  auto zero3 = nf4;
  zero3.insert(zero3.end(), {"--zero_stage", "3"});
  const auto sharded = on_ranks(2, dir, "nf4-3", zero3, moe);
  CHECK_THAT(sharded.log, Catch::Contains("with the block Linear weights and the experts in nf4 ("));
  CHECK_THAT(sharded.log, Catch::Contains("on 4 Linear layers and 2 expert weights (q_proj,v_proj; "
                                          "mlp.experts.down_proj)"));
  const auto plain = on_ranks(2, dir, "nf4-0", nf4, moe);
  check_same(sharded.losses, plain.losses, 1e-5);

  // The adapters trained (lora_B starts at zero), and the run's model holds each expert group as the nf4 storage of the published tensors, and the
  // merged export writes them dequantized.
  const auto path = dir + "/nf4-0/ckpt-00000006.pt";
  const auto saved = ampt::checkpoint::load(path);
  int adapters = 0;
  for (const auto& [name, tensor] : saved.model) {
    if (name.find(".lora_B.") == std::string::npos) continue;
    ++adapters;
    CHECK(tensor.abs().max().item<double>() > 0.0);
  }
  CHECK(adapters == 6);  // q_proj, v_proj and the experts' down_proj in both blocks
  auto model = ampt::commands::load_run_model(ampt::commands::run_config(saved, {}, {}), saved,
                                              path, torch::kCPU);
  const auto hf_config = ampt::hf::read_llama_config(dir + "/hf/config.json");
  const auto linears = ampt::models::declared_linears(hf_config);
  r = run_ampt({"export", "--format", "hf", "--merge", "--checkpoint", path, "--out", dir + "/merged"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::map<std::string, torch::Tensor> published, merged;
  for (auto& [name, t] : ampt::hf::read_llama_weights(ampt::hf::model_files(dir + "/hf"), hf_config, linears)) {
    published[name] = t;
  }
  for (auto& [name, t] : ampt::hf::read_llama_weights(ampt::hf::model_files(dir + "/merged"), hf_config, linears)) {
    merged[name] = t;
  }
  int groups = 0;
  for (const auto& weight : ampt::models::quantizable_weights(*model.module)) {
    if (weight.name.find(".experts.") == std::string::npos) continue;
    INFO(weight.name);
    ++groups;
    REQUIRE(weight.quantized());
    const auto values = weight.quantized()->dequantize(torch::kFloat);
    CHECK(torch::equal(values, ampt::precision::dequantize_nf4(
                                   ampt::precision::quantize_nf4(published.at(weight.name)),
                                   torch::kFloat)));
    if (weight.name.ends_with("gate_up_proj")) {
      CHECK(torch::equal(merged.at(weight.name), values));
      continue;
    }
    // The adapter's update, by hand from its factors (peft's layout, scale 16 / 4), folded in.
    const auto a = saved_tensor(saved, weight.name + ".lora_A.weight");
    const auto b = saved_tensor(saved, weight.name + ".lora_B.weight");
    const int64_t experts = values.size(0), rank = 4;
    auto expected = values.clone();
    for (int64_t e = 0; e < experts; ++e) {
      expected[e] += b.view({b.size(0), rank, experts}).select(2, e).mm(
                         a.view({experts, rank, a.size(1)})[e]) * 4.0;
    }
    CHECK(torch::allclose(merged.at(weight.name), expected, 1e-5, 1e-6));
  }
  CHECK(groups == 2 * 2);  // gate_up_proj and down_proj in both blocks
}
