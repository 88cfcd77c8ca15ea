// --sampler exact (the default) as whole GRPO runs: on every step the sampler's log-probability of
// each sampled token equals the training forward's bit for bit (mismatch/max_abs_logp, the
// largest |trainer - sampler| over the completion tokens, is 0, and with it mismatch/kl and
// mismatch/ratio_outside), for tiny Llama, Qwen3 and Qwen3-MoE models, full, LoRA and QLoRA, in
// fp32, bf16 and fp16, with a prompt sampled alone and beside 1, 3 and 7 others of other lengths,
// the trainer at micro-batch 1 and 8, at 1 and 2 threads, at top-p 0.9, on 2 Gloo ranks with
// ZeRO-3, and after optimizer steps (three steps a run, the format reward scoring some
// completions of random bytes 1, those without any of 21 letters, about half of them at 8 bytes,
// so that the weights move). The runs cover each pair of (model, adapter,
// precision) values once (a Latin square), not their whole product. The negative control:
// --sampler fast on the same kind of run shows a mismatch.
#include "distributed/rank_processes.h"
#include "support/json_field.h"
#include "support/process.h"
#include "train/rollout_runs.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

using namespace ampt::test;

namespace {

struct ExactRun {
  std::string model;       // llama, qwen3, qwen3-moe (their tiny presets)
  std::string adapter;     // full, lora, qlora
  std::string precision;   // no, bf16, fp16
  int64_t generations;     // G; batch_size x grad_accum_steps / G prompts sampled together
  int64_t batch_size;      // the trainer's micro-batch
  int64_t grad_accum;
  std::string threads;     // OMP_NUM_THREADS
  std::string top_p;
};

std::vector<std::string> exact_args(const ByteRolloutFiles& files, const ExactRun& run, const std::string& out) {
  std::vector<std::string> args{
      "train", "--model", run.model, "--vocab_size", "257", "--block_size", "40", "--tokenizer", files.tokenizer,
      "--dataset", "jsonl:" + files.prompts, "--objective", "grpo", "--reward", "format", "--reward_format",
      "[^a-u]*", "--num_generations", std::to_string(run.generations), "--max_completion_length", "8",
      "--temperature", "1.5", "--top_p", run.top_p, "--batch_size", std::to_string(run.batch_size),
      "--grad_accum_steps", std::to_string(run.grad_accum), "--max_steps", "3", "--log_every", "1", "--lr",
      "3e-2", "--warmup_steps", "0", "--mixed_precision", run.precision, "--loader_workers", "0", "--device",
      "cpu", "--seed", "5", "--output_dir", out};
  if (run.adapter != "full") args.insert(args.end(), {"--lora_rank", "4"});
  if (run.adapter == "qlora") args.insert(args.end(), {"--base_dtype", "nf4"});
  return args;
}

std::string describe_run(const ExactRun& run) {
  return run.model + " " + run.adapter + " " + run.precision + ", G " + std::to_string(run.generations) +
         ", micro-batch " + std::to_string(run.batch_size) + " x " + std::to_string(run.grad_accum) + ", " +
         run.threads + " threads, top-p " + run.top_p;
}

// Every step's sampler log-probabilities were the trainer's, and the steps trained.
void check_exact_steps(const std::vector<std::string>& steps) {
  REQUIRE(steps.size() == 3);
  for (size_t s = 0; s < steps.size(); ++s) {
    INFO("step " << s + 1 << ": " << steps[s]);
    CHECK(json_field(steps[s], "mismatch/max_abs_logp") == 0.0);
    CHECK(json_field(steps[s], "mismatch/kl") == 0.0);
    CHECK(json_field(steps[s], "mismatch/ratio_outside") == 0.0);
    CHECK(json_field(steps[s], "completions/mean_length") >= 1.0);
  }
  // Some step had rewards that differ within a group: its gradient moved the weights, and the
  // later steps sampled from the moved ones.
  const bool moved = std::ranges::any_of(steps, [](const std::string& line) { return json_field(line, "grad_norm") > 0.0; });
  CHECK(moved);
}

}  // namespace

TEST_CASE("grpo exact sampler: the sampler's log-probabilities are the trainer's bit for bit, for "
          "Llama, Qwen3 and Qwen3-MoE, full, LoRA and QLoRA, fp32, bf16 and fp16",
          "[train][grpo][cli][exact]") {
  const auto files = write_byte_rollout_files();
  // (model, adapter, precision) a Latin square; each prompt sampled alone (G 4, 4 completions a
  // step), beside 1 (G 4, 8), 3 (G 2, 8) and 7 others (G 2, 16); micro-batches of 1, 4 and 8; 1
  // and 2 threads; top-p 0.9.
  const std::vector<ExactRun> runs{
      {"llama", "full", "no", 4, 1, 8, "1", "1"},
      {"llama", "lora", "bf16", 2, 8, 1, "2", "0.9"},
      {"llama", "qlora", "fp16", 4, 4, 1, "2", "1"},
      {"qwen3", "full", "bf16", 2, 8, 2, "1", "1"},
      {"qwen3", "lora", "fp16", 4, 1, 8, "2", "0.9"},
      {"qwen3", "qlora", "no", 2, 8, 1, "1", "1"},
      {"qwen3-moe", "full", "fp16", 4, 4, 1, "2", "1"},
      {"qwen3-moe", "lora", "no", 2, 8, 2, "2", "0.9"},
      {"qwen3-moe", "qlora", "bf16", 4, 1, 8, "1", "1"},
  };
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& run = runs[i];
    INFO(describe_run(run));
    const auto out = files.dir + "/run" + std::to_string(i);
    const auto r = run_ampt(exact_args(files, run, out), {{"OMP_NUM_THREADS", run.threads}});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains(", exact sampler"));
    check_exact_steps(rollout_steps(out));
  }
}

TEST_CASE("grpo exact sampler: bit for bit on 2 Gloo ranks with ZeRO-3", "[train][grpo][cli][exact][distributed]") {
  const auto files = write_byte_rollout_files();
  const ExactRun run{"qwen3", "full", "bf16", 2, 2, 2, "1", "1"};
  auto args = exact_args(files, run, files.dir + "/ranks");
  args.insert(args.begin(), AMPT_BINARY);
  args.insert(args.end(), {"--zero_stage", "3", "--dist_timeout", "60"});
  const auto ranks = run_rank_processes(2, args, files.dir + "/logs");
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << " stdout:\n" << ranks.out[r] << "\nstderr:\n" << ranks.err[r]);
    REQUIRE(ranks.status[r] == 0);
  }
  CHECK_THAT(ranks.out[0], Catch::Contains("[DIST] 2 ranks, gloo backend"));
  check_exact_steps(rollout_steps(files.dir + "/ranks"));
}

TEST_CASE("grpo fast sampler: the same kind of run shows a mismatch, and TRL's sampling figures",
          "[train][grpo][cli][exact]") {
  const auto files = write_byte_rollout_files();
  // A GPT in fp32: its decode step's GEMMs and attention reduce in another order than the
  // training forward's, which float32's rounding shows.
  std::vector<std::string> args{
      "train", "--model", "gpt", "--n_layer", "2", "--n_embd", "64", "--n_head", "4", "--vocab_size", "257",
      "--block_size", "40", "--tokenizer", files.tokenizer, "--dataset", "jsonl:" + files.prompts, "--objective",
      "grpo", "--reward", "format", "--reward_format", "[^a-u]*", "--num_generations", "4",
      "--max_completion_length", "8", "--batch_size", "8", "--grad_accum_steps", "1", "--max_steps", "3",
      "--log_every", "1", "--lr", "3e-2", "--warmup_steps", "0", "--mixed_precision", "no", "--loader_workers",
      "0", "--device", "cpu", "--seed", "5", "--sampler", "fast", "--output_dir", files.dir + "/fast"};
  const auto r = run_ampt(args);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains(", fast sampler corrected (sequence_mask weights up to 3)"));
  const auto steps = rollout_steps(files.dir + "/fast");
  REQUIRE(steps.size() == 3);
  double largest = 0;
  for (const auto& line : steps) {
    INFO(line);
    largest = std::max(largest, json_field(line, "mismatch/max_abs_logp"));
    CHECK(json_field(line, "sampling/sampling_logp_difference/max") == json_field(line, "mismatch/max_abs_logp"));
    CHECK(json_field(line, "sampling/importance_sampling_ratio/mean") == Approx(1.0).margin(1e-4));
  }
  CHECK(largest > 0.0);
  // The same run exact: none.
  args.back() = files.dir + "/exact";
  args.erase(std::ranges::find(args, "--sampler"), std::ranges::find(args, "--sampler") + 2);
  const auto exact = run_ampt(args);
  INFO(exact.out << exact.err);
  REQUIRE(exact.exit_code == 0);
  check_exact_steps(rollout_steps(files.dir + "/exact"));
}

TEST_CASE("grpo sampler: settings that cannot hold are one line each", "[train][grpo][cli][errors]") {
  const auto files = write_byte_rollout_files();
  const ExactRun run{"llama", "full", "no", 2, 2, 1, "1", "1"};
  const auto refused = [&](std::vector<std::string> extra, const std::string& message) {
    auto args = exact_args(files, run, files.dir + "/refused");
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_ampt(args);
    INFO(r.out << r.err);
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, Catch::Contains(message));
    CHECK(lines_with(r.err, "\n").size() <= 1);
  };
  refused({"--importance_sampling_cap", "2"},
          "importance_sampling_cap (flag --importance_sampling_cap) corrects --sampler fast's mismatch, and the "
          "exact sampler has none: drop it or set --sampler fast");
  refused({"--dropout", "0.1"},
          "dropout 0.1 (flag --dropout) makes the training forward differ from the sampler's, which --sampler "
          "exact computes bit for bit: set it to 0, or use --sampler fast");
  refused({"--sampler", "quick"}, "quick");
}
