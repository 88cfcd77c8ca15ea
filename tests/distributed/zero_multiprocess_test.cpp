// ZeRO stages 1, 2 and 3 as whole programs: 2 and 4 ampt processes on loopback with Gloo against
// stage 0, sharded checkpoints resumed on the same and on other world sizes and stages, a lost
// rank, and stage 3's usage errors.
#include "ampt/checkpoint/checkpoint.h"
#include "ampt/checkpoint/safetensors.h"
#include "rank_processes.h"
#include "support/json_field.h"
#include "support/process.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <tuple>
#include <vector>

using namespace ampt::test;

namespace {

// A tiny MLP trained with AdamW (clipping on), `world` ranks of batch `batch` each; `extra`
// flags come last and win over these.
std::vector<std::string> zero_args(const std::string& out, int64_t batch, int64_t steps,
                                   int64_t stage, std::vector<std::string> extra = {}) {
  std::vector<std::string> argv{
      AMPT_BINARY, "train", "--output_dir", out, "--mlp_hidden", "16", "--mlp_layers", "2",
      "--synthetic_features", "8", "--synthetic_samples", "768", "--batch_size",
      std::to_string(batch), "--max_steps", std::to_string(steps), "--optimizer", "adamw",
      "--lr", "0.01", "--warmup_steps", "0", "--max_grad_norm", "0.5", "--log_every", "1",
      "--loader_workers", "0", "--eval_batches", "1", "--seed", "11", "--dist_timeout", "30",
      "--zero_stage", std::to_string(stage)};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

void require_success(const RankRun& run) {
  for (size_t r = 0; r < run.status.size(); ++r) {
    INFO("rank " << r << " stdout:\n" << run.out[r] << "\nstderr:\n" << run.err[r]);
    // Exit 0 also says every rank ended with rank 0's weights bit for bit.
    REQUIRE(run.status[r] == 0);
  }
}

RankRun train(int world, const std::vector<std::string>& argv, const std::string& logs) {
  auto run = run_rank_processes(world, argv, logs);
  require_success(run);
  return run;
}

// Every step's loss, from the run's metrics.jsonl.
std::vector<double> losses(const std::string& dir) {
  return step_losses(read_file(dir + "/metrics.jsonl"));
}

// The model and optimizer tensors of a checkpoint (ordinary or sharded), by name.
std::map<std::string, torch::Tensor> state_of(const std::string& path) {
  const auto c = ampt::checkpoint::load(path);
  std::map<std::string, torch::Tensor> out;
  for (const auto* group : {&c.model, &c.optimizer}) {
    for (const auto& [name, tensor] : *group) out[name] = tensor;
  }
  return out;
}

// Same names; every tensor within `rtol` relative and `atol` absolute (by default `rtol` x 1e-2,
// for values near 0), but a GPT attention's key bias (the middle third of c_attn.bias and of its
// optimizer state), whose exact gradient is 0, within `key_bias_atol` (kKeyBiasNoiseAtol below).
void check_close(const std::string& a, const std::string& b, double rtol, double atol = -1.0,
                 double key_bias_atol = -1.0) {
  if (atol < 0.0) atol = rtol * 1e-2;
  if (key_bias_atol < 0.0) key_bias_atol = atol;
  const auto left = state_of(a);
  const auto right = state_of(b);
  REQUIRE(left.size() == right.size());
  for (const auto& [name, tensor] : left) {
    REQUIRE(right.count(name) == 1);
    const auto& other = right.at(name);
    INFO(name << ": max difference " << (tensor - other).abs().max().item<double>());
    if (name.find("attn.c_attn.bias") == std::string::npos || tensor.dim() != 1) {
      CHECK(torch::allclose(tensor, other, rtol, atol));
      continue;
    }
    const int64_t third = tensor.size(0) / 3;
    for (const auto& [from, to, tolerance] : std::vector<std::tuple<int64_t, int64_t, double>>{
             {0, third, atol}, {third, 2 * third, key_bias_atol}, {2 * third, 3 * third, atol}}) {
      INFO("elements " << from << " to " << to);
      CHECK(torch::allclose(tensor.slice(0, from, to), other.slice(0, from, to), rtol, tolerance));
    }
  }
}

void check_losses_close(const std::vector<double>& a, const std::vector<double>& b, double rtol) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("step " << i + 1);
    CHECK(a[i] == Approx(b[i]).epsilon(rtol));
  }
}

// Stages 1 and 2 against stage 0, on `world` ranks in `precision`.
void check_stages(int world, const std::vector<std::string>& precision, double rtol) {
  const auto dir = make_temp_dir();
  std::map<int64_t, RankRun> runs;
  for (const int64_t stage : {0, 1, 2}) {
    const auto out = fmt::format("{}/stage{}", dir, stage);
    runs[stage] = train(world, zero_args(out, 8, 6, stage, precision), out + "-logs");
  }
  const auto stage0 = dir + "/stage0/ckpt-00000006.pt";
  for (const int64_t stage : {1, 2}) {
    INFO("stage " << stage);
    const auto& out = runs[stage].out[0];
    CHECK_THAT(out, Catch::Contains(fmt::format("[ZeRO] stage {} over {} ranks", stage, world)));
    CHECK_THAT(out, Catch::Contains("bytes per parameter on each rank"));
    CHECK(runs[stage].out[1].empty());  // rank 0 alone logs
    const auto sharded = fmt::format("{}/stage{}/ckpt-00000006", dir, stage);
    CHECK(std::filesystem::exists(sharded + "/manifest.json"));
    CHECK(std::filesystem::exists(fmt::format("{}/rank-{:05}.pt", sharded, world - 1)));
    check_losses_close(losses(fmt::format("{}/stage{}", dir, stage)), losses(dir + "/stage0"), rtol);
    // The same steps skipped, the same parameter named for each, whichever rank holds it.
    CHECK(lines_with(out, "Skipped step") == lines_with(runs[0].out[0], "Skipped step"));
    CHECK(lines_with(out, "Skipped Steps:") == lines_with(runs[0].out[0], "Skipped Steps:"));
    check_close(sharded, stage0, rtol);
  }
}

}  // namespace

TEST_CASE("zero: stages 1 and 2 on 2 Gloo ranks train like stage 0 in fp32", "[dist][zero][cli]") {
  check_stages(2, {"--mixed_precision", "no"}, 1e-6);
}

TEST_CASE("zero: stages 1 and 2 on 4 Gloo ranks train like stage 0 in fp32", "[dist][zero][cli]") {
  check_stages(4, {"--mixed_precision", "no"}, 1e-6);
}

TEST_CASE("zero: stages 1 and 2 with accumulation and SGD train like stage 0 in fp32",
          "[dist][zero][cli]") {
  // Only the last micro-batch communicates; SGD's momentum is the sharded state.
  check_stages(2, {"--mixed_precision", "no", "--grad_accum_steps", "2", "--optimizer", "sgd",
                   "--momentum", "0.9", "--lr", "0.1"},
               1e-6);
}

TEST_CASE("zero: stages 1 and 2 on 2 Gloo ranks train like stage 0 in bf16 with a bf16 reduce",
          "[dist][zero][cli]") {
  check_stages(2, {"--mixed_precision", "bf16", "--reduce_dtype", "bf16"}, 1e-2);
}

TEST_CASE("zero: stage 2 on 2 Gloo ranks refreshes O1's half copies from the gathered weights, "
          "with autocast's losses bit for bit",
          "[dist][zero][cli][half_weights]") {
  const auto dir = make_temp_dir();
  std::map<std::string, std::string> outs;
  for (const auto& [name, flag] : {std::pair{"casts", "--half_weights=false"},
                                   std::pair{"copies", "--fp32_weight_grads=false"}}) {
    const auto out = fmt::format("{}/{}", dir, name);
    train(2, zero_args(out, 8, 6, 2, {"--mixed_precision", "bf16", flag}), out + "-logs");
    outs[name] = out;
  }
  CHECK(losses(outs["copies"]) == losses(outs["casts"]));
  check_close(outs["copies"] + "/ckpt-00000006", outs["casts"] + "/ckpt-00000006", 0.0, 0.0);
}

TEST_CASE("zero: O2 fp16 on 4 Gloo ranks shards the fp32 masters and agrees on every skip",
          "[dist][zero][cli]") {
  // 2^19 overflows the first two steps' gradients: every rank must skip them alike.
  check_stages(4, {"--mixed_precision", "fp16", "--amp_opt_level", "O2", "--grad_scaler_init",
                   "524288"},
               1e-2);
}

TEST_CASE("zero: a sharded checkpoint resumes exactly on the same and on other world sizes",
          "[dist][zero][cli][checkpoint]") {
  const auto dir = make_temp_dir();
  // The global batch stays 16 throughout: 2 x 8, 1 x 16, 4 x 4; fp32, where another split of
  // the batch changes only the rounding of the gradients' sums.
  const auto args = [&](const std::string& out, int64_t batch, int64_t stage,
                        const std::string& flag, const std::string& value) {
    return zero_args(dir + "/" + out, batch, 6, stage, {"--mixed_precision", "no", flag, value});
  };
  train(2, args("two", 8, 2, "--save_every", "3"), dir + "/logs-two");
  const auto reference = dir + "/two/ckpt-00000006";
  const auto midway = dir + "/two/ckpt-00000003";
  REQUIRE(std::filesystem::exists(midway + "/manifest.json"));

  SECTION("2 -> 2 continues bit for bit") {
    train(2, args("again", 8, 2, "--resume", midway), dir + "/logs-again");
    check_close(dir + "/again/ckpt-00000006", reference, 0.0);
  }
  SECTION("2 -> 1: one process reads every shard") {
    const auto one = run_process(args("one", 16, 2, "--resume", midway), {{"OMP_NUM_THREADS", "1"}});
    INFO(one.out << one.err);
    REQUIRE(one.exit_code == 0);
    CHECK_THAT(one.out, Catch::Contains("(2 shards re-cut for 1 rank)"));
    CHECK_THAT(one.out, Catch::Contains("[ZeRO] zero_stage 2 has nothing to shard in a single process"));
    check_close(dir + "/one/ckpt-00000006.pt", reference, 1e-6);
  }
  SECTION("2 -> 4: the shards are re-cut") {
    const auto four = train(4, args("four", 4, 1, "--resume", midway), dir + "/logs-four");
    CHECK_THAT(four.out[0], Catch::Contains("(2 shards re-cut for 4 ranks)"));
    check_close(dir + "/four/ckpt-00000006", reference, 1e-6);
  }
  SECTION("1 -> 4: an ordinary checkpoint is cut into shards") {
    const auto one = run_process(args("single", 16, 0, "--save_every", "3"), {{"OMP_NUM_THREADS", "1"}});
    INFO(one.err);
    REQUIRE(one.exit_code == 0);
    train(4, args("four", 4, 2, "--resume", dir + "/single/ckpt-00000003.pt"), dir + "/logs-four");
    check_close(dir + "/four/ckpt-00000006", dir + "/single/ckpt-00000006.pt", 1e-6);
  }
}

TEST_CASE("zero: ampt export writes whole weights from a sharded checkpoint", "[dist][zero][cli]") {
  const auto dir = make_temp_dir();
  train(2, zero_args(dir + "/out", 8, 2, 2), dir + "/logs");
  const auto e = run_ampt({"export", "--checkpoint", dir + "/out", "--out", dir + "/model.safetensors"});
  INFO(e.out << e.err);
  REQUIRE(e.exit_code == 0);
  // Every weight whole, equal to what the 2-rank run's own final check saw on every rank.
  const auto exported = ampt::checkpoint::read_safetensors(dir + "/model.safetensors");
  std::map<std::string, torch::Tensor> by_name(exported.begin(), exported.end());
  const auto c = ampt::checkpoint::load(dir + "/out");
  for (const auto& [name, tensor] : c.model) {
    INFO(name);
    REQUIRE(by_name.count(name) == 1);
    CHECK(torch::equal(by_name.at(name), tensor));
  }
  CHECK(by_name.size() == c.model.size());
}

TEST_CASE("zero: a killed rank makes the others stop naming it", "[dist][zero][cli]") {
  const int victim = GENERATE(0, 1);
  const auto dir = make_temp_dir();
  check_lost_rank_is_named(
      zero_args(dir + "/out", 8, 1000000, 2, {"--dist_timeout", "10", "--synthetic_samples", "65536"}),
      victim, dir);
}

TEST_CASE("zero: O2 with a precision schedule is a usage error on every rank", "[dist][zero][cli]") {
  const auto dir = make_temp_dir();
  const auto run = run_rank_processes(
      2, zero_args(dir + "/out", 8, 4, 1, {"--amp_opt_level", "O2", "--precision_schedule", "fp32:2,bf16"}),
      dir + "/logs");
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << ": " << run.err[r]);
    CHECK(run.status[r] == 2);
    CHECK_THAT(run.err[r], Catch::StartsWith("ampt: error: zero_stage 1 with amp_opt_level O2 cannot "
                                             "follow a precision schedule"));
  }
}

// ---- ZeRO-3: a GPT's parameters sharded, each block gathered when it computes.

namespace {

// A tiny GPT (2 blocks) on `world` ranks of batch `batch`, AdamW with clipping; `extra` last.
std::vector<std::string> gpt_args(const std::string& out, int64_t batch, int64_t steps,
                                  int64_t stage, std::vector<std::string> extra = {}) {
  std::vector<std::string> argv{
      AMPT_BINARY, "train", "--output_dir", out, "--model", "gpt", "--n_layer", "2", "--n_embd",
      "24", "--n_head", "2", "--block_size", "8", "--vocab_size", "40", "--synthetic_samples",
      "512", "--batch_size", std::to_string(batch), "--max_steps", std::to_string(steps),
      "--lr", "0.01", "--warmup_steps", "0", "--max_grad_norm", "0.5", "--log_every", "1",
      "--loader_workers", "0", "--eval_batches", "1", "--seed", "11", "--dist_timeout", "30",
      "--device", "cpu", "--zero_stage", std::to_string(stage)};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

// Parameters whose gradient is 0 in exact arithmetic (the attention's key bias: softmax ignores
// a shift common to every key) get rounding noise as their gradient, which AdamW divides by its
// own root mean square: any change in summation order (stage 3 runs blocks one by one where
// stage 0 fuses residual adds across them, sums micro-batches and ranks in another order, and
// takes its gradient norms from the pieces' norms) moves them by up to about lr·steps·2e-4 here
// in fp32 (seen: 1.05e-5 after 6 steps at lr 0.01 on an EPYC on 4 ranks, where stage 0's norms
// came from ampt's one-pass sum, 2026-11-29). In bf16 or fp16 the noise is far above AdamW's
// eps, so each step moves them by up to lr whichever sign the noise takes: up to lr·steps (seen:
// 0.0054 after 4 bf16 steps at lr 0.01 on a Xeon with AMX, under 2e-4 on an EPYC). Everything
// else agrees to `rtol`, with this absolute floor for values near 0.
constexpr double kNoiseAtol = 1e-5;
// The key bias's in fp32: lr·steps·5e-4, over twice the noise seen.
constexpr double kKeyBiasNoiseAtol = 3e-5;

// Stage 3 against stage 0 on `world` ranks with `flags`: the same losses and final state within
// `rtol`, the same skipped steps.
void check_stage3(int world, const std::vector<std::string>& flags, double rtol) {
  const auto dir = make_temp_dir();
  std::map<int64_t, RankRun> runs;
  for (const int64_t stage : {0, 3}) {
    const auto out = fmt::format("{}/stage{}", dir, stage);
    runs[stage] = train(world, gpt_args(out, 4, 6, stage, flags), out + "-logs");
  }
  const auto& out = runs[3].out[0];
  CHECK_THAT(out, Catch::Contains(fmt::format("[ZeRO] stage 3 over {} ranks", world)));
  CHECK_THAT(out, Catch::Contains("the root and two of 2 blocks"));
  check_losses_close(losses(dir + "/stage3"), losses(dir + "/stage0"), rtol);
  CHECK(lines_with(out, "Skipped step") == lines_with(runs[0].out[0], "Skipped step"));
  CHECK(lines_with(out, "Skipped Steps:") == lines_with(runs[0].out[0], "Skipped Steps:"));
  const bool half = std::ranges::any_of(flags, [](const std::string& f) {
    return f.find("bf16") != std::string::npos || f.find("fp16") != std::string::npos;
  });
  const double lr = 0.01, steps = 6;
  check_close(dir + "/stage3/ckpt-00000006", dir + "/stage0/ckpt-00000006.pt", rtol,
              std::max(kNoiseAtol, rtol * 1e-2), half ? lr * steps : kKeyBiasNoiseAtol);
}

}  // namespace

TEST_CASE("zero3: stage 3 on 2 Gloo ranks trains a GPT like stage 0 in fp32", "[dist][zero3][cli]") {
  check_stage3(2, {"--mixed_precision", "no"}, 1e-5);
}

TEST_CASE("zero3: stage 3 on 4 Gloo ranks trains a GPT like stage 0 in fp32", "[dist][zero3][cli]") {
  check_stage3(4, {"--mixed_precision", "no"}, 1e-5);
}

TEST_CASE("zero3: stage 3 on 2 Gloo ranks trains a Llama like stage 0 in fp32", "[dist][zero3][cli]") {
  // Llama's blocks (layers.N, RMSNorm, SwiGLU, grouped-query attention) through the same hooks.
  check_stage3(2, {"--model", "llama", "--mixed_precision", "no"}, 1e-5);
}

TEST_CASE("zero3: stage 3 with accumulation, clipping and activation checkpointing trains like "
          "stage 0 in fp32",
          "[dist][zero3][cli]") {
  // Every micro-batch reduce-scatters into the shard; max_grad_norm 0.5 clips every step; the
  // recomputation in backward gathers each block again.
  check_stage3(2, {"--mixed_precision", "no", "--grad_accum_steps", "2", "--grad_ckpt"}, 1e-5);
}

TEST_CASE("zero3: stage 3 follows a precision schedule and keeps fp32 modules like stage 0",
          "[dist][zero3][cli]") {
  // fp32 for two steps, then bf16 autocast: the Linear weights are gathered in fp32, then bf16,
  // except the MLP's c_fc, an fp32 island throughout. A block gathered in half computes its
  // weight gradients in half: stage 0 is held to that arithmetic (its half copies' gradients as
  // autocast makes them, --fp32_weight_grads=false).
  check_stage3(2, {"--precision_schedule", "fp32:2,bf16", "--keep_fp32_modules", "mlp.c_fc",
                   "--fp32_weight_grads=false"},
               2e-2);
}

TEST_CASE("zero3: fp16 with a scaler forced to overflow skips the same steps on every rank",
          "[dist][zero3][cli]") {
  const auto level = GENERATE(as<std::string>{}, "O1", "O2");
  INFO(level);
  // 2^24 overflows the first steps' fp16 gradients: every rank must skip them alike, as stage 0
  // (whose weight gradients are half ones, as stage 3's: fp32 ones would overflow less often).
  check_stage3(4, {"--mixed_precision", "fp16", "--amp_opt_level", level, "--grad_scaler_init",
                   "16777216", "--fp32_weight_grads=false"},
               2e-2);
}

TEST_CASE("zero3: sharded checkpoints resume across stages and world sizes", "[dist][zero3][cli][checkpoint]") {
  const auto dir = make_temp_dir();
  // The global batch stays 8: 2 x 4, 1 x 8, 4 x 2; fp32.
  const auto args = [&](const std::string& out, int64_t batch, int64_t stage,
                        const std::string& flag, const std::string& value) {
    return gpt_args(dir + "/" + out, batch, 6, stage, {"--mixed_precision", "no", flag, value});
  };
  train(2, args("three", 4, 3, "--save_every", "3"), dir + "/logs-three");
  const auto reference = dir + "/three/ckpt-00000006";
  const auto midway = dir + "/three/ckpt-00000003";
  REQUIRE(std::filesystem::exists(midway + "/manifest.json"));

  SECTION("3 -> 3 on the same ranks continues bit for bit") {
    train(2, args("again", 4, 3, "--resume", midway), dir + "/logs-again");
    check_close(dir + "/again/ckpt-00000006", reference, 0.0);
  }
  SECTION("3 -> 0 in one process") {
    const auto one = run_process(args("one", 8, 0, "--resume", midway), {{"OMP_NUM_THREADS", "1"}});
    INFO(one.out << one.err);
    REQUIRE(one.exit_code == 0);
    CHECK_THAT(one.out, Catch::Contains("(2 shards re-cut for 1 rank)"));
    check_close(dir + "/one/ckpt-00000006.pt", reference, 1e-5, kNoiseAtol);
  }
  SECTION("3 -> 3 on 4 ranks") {
    const auto four = train(4, args("four", 2, 3, "--resume", midway), dir + "/logs-four");
    CHECK_THAT(four.out[0], Catch::Contains("(2 shards re-cut for 4 ranks)"));
    check_close(dir + "/four/ckpt-00000006", reference, 1e-5, kNoiseAtol);
  }
  SECTION("3 -> 2") {
    train(2, args("two", 4, 2, "--resume", midway), dir + "/logs-two");
    check_close(dir + "/two/ckpt-00000006", reference, 1e-5, kNoiseAtol);
  }
  SECTION("0 -> 3 and 2 -> 3") {
    const auto one = run_process(args("single", 8, 0, "--save_every", "3"), {{"OMP_NUM_THREADS", "1"}});
    INFO(one.err);
    REQUIRE(one.exit_code == 0);
    train(2, args("from0", 4, 3, "--resume", dir + "/single/ckpt-00000003.pt"), dir + "/logs-from0");
    check_close(dir + "/from0/ckpt-00000006", dir + "/single/ckpt-00000006.pt", 1e-5, kNoiseAtol);
    train(2, args("stage2", 4, 2, "--save_every", "3"), dir + "/logs-stage2");
    train(4, args("from2", 2, 3, "--resume", dir + "/stage2/ckpt-00000003"), dir + "/logs-from2");
    check_close(dir + "/from2/ckpt-00000006", dir + "/stage2/ckpt-00000006", 1e-5, kNoiseAtol);
  }
}

TEST_CASE("zero3: ampt export writes whole weights from a stage 3 checkpoint", "[dist][zero3][cli]") {
  const auto dir = make_temp_dir();
  train(2, gpt_args(dir + "/out", 4, 2, 3, {"--mixed_precision", "no"}), dir + "/logs");
  const auto e = run_ampt({"export", "--checkpoint", dir + "/out", "--out", dir + "/model.safetensors"});
  INFO(e.out << e.err);
  REQUIRE(e.exit_code == 0);
  const auto exported = ampt::checkpoint::read_safetensors(dir + "/model.safetensors");
  std::map<std::string, torch::Tensor> by_name(exported.begin(), exported.end());
  const auto c = ampt::checkpoint::load(dir + "/out");
  CHECK(by_name.size() == c.model.size());
  for (const auto& [name, tensor] : c.model) {
    INFO(name);
    REQUIRE(by_name.count(name) == 1);
    CHECK(torch::equal(by_name.at(name), tensor));
  }
}

TEST_CASE("zero3: a killed rank makes the others stop naming it", "[dist][zero3][cli]") {
  const auto dir = make_temp_dir();
  check_lost_rank_is_named(gpt_args(dir + "/out", 4, 1000000, 3,
                                    {"--dist_timeout", "10", "--synthetic_samples", "65536",
                                     "--mixed_precision", "no"}),
                           1, dir);
}

TEST_CASE("zero3: what stage 3 cannot do is a one-line usage error on every rank", "[dist][zero3][cli]") {
  const auto dir = make_temp_dir();
  const auto refused = [&](std::vector<std::string> argv, const std::string& message) {
    INFO(message);
    const auto run = run_rank_processes(2, argv, dir + "/logs");
    for (int r = 0; r < 2; ++r) {
      INFO("rank " << r << ": " << run.err[r]);
      CHECK(run.status[r] == 2);
      CHECK_THAT(run.err[r], Catch::StartsWith("ampt: error: " + message));
      CHECK(lines_with(run.err[r], "ampt: error").size() == 1);
    }
  };
  refused(zero_args(dir + "/mlp", 8, 2, 3),
          "zero_stage 3 gathers a model's weights block by block, and model mlp has no "
          "transformer blocks to hook");
  refused(gpt_args(dir + "/fp16", 4, 2, 3, {"--mixed_precision", "bf16", "--param_dtype", "fp16"}),
          "param_dtype fp16 differs from the autocast dtype bf16 of the run (BF16)");
  refused(gpt_args(dir + "/fp32", 4, 2, 3, {"--mixed_precision", "no", "--param_dtype", "bf16"}),
          "param_dtype bf16 needs autocast, and the run (FP32) computes in fp32");
  refused(gpt_args(dir + "/o2", 4, 2, 3, {"--mixed_precision", "bf16", "--amp_opt_level", "O2",
                                          "--param_dtype", "fp32"}),
          "param_dtype fp32 with amp_opt_level O2");
  refused(gpt_args(dir + "/two", 4, 2, 2, {"--mixed_precision", "bf16", "--param_dtype", "bf16"}),
          "param_dtype bf16 applies to zero_stage 3");
}
