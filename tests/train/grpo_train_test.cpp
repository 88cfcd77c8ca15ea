// --objective grpo as whole runs of a tiny GPT (GPT-2's tokenizer, from scratch, fp32 on the CPU):
// it samples its own completions, scores them and steps; the log carries TRL's figures and the
// sampler-trainer mismatch, completions.jsonl what it wrote; the same seed gives the same run bit
// for bit, and a resumed run continues it bit for bit (the draws are keyed by step, prompt and
// sample, the data position is the checkpoint's); a reward program that crashes stops the run with
// a checkpoint; every bad setting is one line. The same holds with the rewards of a Python reward
// program, on byte tokens, whose completions (cut inside a character) reach completions.jsonl as
// well-formed UTF-8.
#include "ampt/text/utf8.h"
#include "support/json_field.h"
#include "support/process.h"
#include "support/skip.h"
#include "train/rollout_runs.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

using namespace ampt::test;

namespace {

constexpr const char* kGrpoTokenizer = AMPT_SOURCE_DIR "/.deps/gpt2.tiktoken";

std::string write_prompts(const std::string& dir) {
  const auto path = dir + "/prompts.jsonl";
  write_file(path,
             R"({"prompt": "Two plus two is", "answer": "4"})" "\n"
             R"({"prompt": "The sky is", "answer": "blue"})" "\n"
             R"({"prompt": "Ten minus three is", "answer": "7"})" "\n"
             R"({"prompt": "One and one make", "answer": "2"})" "\n");
  return path;
}

std::vector<std::string> grpo_args(const std::string& prompts, const std::string& out,
                                   std::vector<std::string> extra) {
  std::vector<std::string> args{
      "train", "--model", "gpt", "--n_layer", "1", "--n_embd", "32", "--n_head", "2",
      "--block_size", "32", "--vocab_size", "50257", "--tokenizer", kGrpoTokenizer, "--dataset",
      "jsonl:" + prompts, "--objective", "grpo", "--reward", "exact,format:0.5", "--reward_format",
      "[^a]*", "--num_generations", "4", "--max_completion_length", "6", "--batch_size", "4",
      "--grad_accum_steps", "2", "--max_steps", "4", "--log_every", "1", "--lr", "1e-2",
      "--warmup_steps", "0", "--mixed_precision", "no", "--loader_workers", "0", "--device", "cpu",
      "--seed", "3", "--output_dir", out};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

ProcessResult run_grpo(const std::vector<std::string>& args) {
  auto r = run_ampt(args);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return r;
}

// The rerun and the resume of check_rerun_and_resume (rollout_runs.h) on the GRPO runs of
// `prompts` with `extra` flags, whatever the rewards made of the completions.
void check_grpo_rerun_and_resume(const std::string& dir, const std::string& prompts,
                                 std::vector<std::string> extra) {
  check_rerun_and_resume(
      [&](const std::string& out, std::vector<std::string> more) {
        more.insert(more.begin(), extra.begin(), extra.end());
        return grpo_args(prompts, out, more);
      },
      dir, {"loss", "reward", "grad_norm", "mismatch/kl", "completions/mean_length"}, 2);
}

}  // namespace

TEST_CASE("grpo: a tiny GPT samples its completions, scores them and steps, and its log has TRL's figures",
          "[train][grpo][cli]") {
  if (!std::filesystem::exists(kGrpoTokenizer)) AMPT_SKIP(reference, "skipping: .deps/gpt2.tiktoken missing");
  const auto dir = make_temp_dir();
  const auto prompts = write_prompts(dir);
  const auto r = run_grpo(grpo_args(prompts, dir + "/out", {}));
  CHECK_THAT(r.out, Catch::Contains("4 prompt records, standard (a string)"));
  CHECK_THAT(r.out, Catch::Contains("grpo, loss_type dapo, epsilon 0.2, token importance ratios, no KL (beta 0)"));
  const auto steps = rollout_steps(dir + "/out");
  REQUIRE(steps.size() == 4);
  for (const auto& line : steps) {
    INFO(line);
    for (const char* key : {"reward", "reward_std", "frac_reward_zero_std", "rewards/exact/mean",
                            "rewards/format/mean", "completions/mean_length", "completions/clipped_ratio",
                            "clip_ratio/region_mean", "mismatch/kl", "mismatch/max_abs_logp",
                            "mismatch/ratio_outside"}) {
      const double value = json_field(line, key);
      CHECK(std::isfinite(value));
    }
    // Completions of at most 6 tokens; the weighted reward is the exact term plus half the format's.
    CHECK(json_field(line, "completions/mean_length") <= 6.0);
    CHECK(json_field(line, "completions/mean_length") >= 1.0);
    CHECK(json_field(line, "reward") ==
          Approx(json_field(line, "rewards/exact/mean") + 0.5 * json_field(line, "rewards/format/mean")).margin(1e-6));
  }
  // Each step is one rollout of 2 prompts (8 completions in groups of 4): its first completions shown.
  const auto shown = lines_with(read_file(dir + "/out/completions.jsonl"), "\"completion\"");
  CHECK(shown.size() == 8);
  CHECK_THAT(shown.front(), Catch::Contains("\"step\": 1"));
}

TEST_CASE("grpo: the same seed gives the same run bit for bit, and a resumed run continues it",
          "[train][grpo][cli][checkpoint]") {
  if (!std::filesystem::exists(kGrpoTokenizer)) AMPT_SKIP(reference, "skipping: .deps/gpt2.tiktoken missing");
  const auto dir = make_temp_dir();
  check_grpo_rerun_and_resume(dir, write_prompts(dir), {});
}

TEST_CASE("grpo: with a Python reward program on byte tokens, the same seed gives the same run bit for bit, "
          "a resumed run continues it, and completions.jsonl is well-formed UTF-8",
          "[train][grpo][cli][checkpoint][reward]") {
  if (!std::filesystem::exists(AMPT_PYTHON)) AMPT_SKIP(reference, "skipping: no Python at " AMPT_PYTHON);
  const auto dir = make_temp_dir();
  // A tiktoken file of the 256 bytes: <|endoftext|> after them (256), as scripts/grpo_toy_task.py's.
  std::string ranks;
  constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (int b = 0; b < 256; ++b) {
    ranks += std::string{kBase64[b >> 2], kBase64[(b & 3) << 4], '=', '='} + " " + std::to_string(b) + "\n";
  }
  write_file(dir + "/bytes.tiktoken", ranks);
  // score.py: 1 when the completion holds the answer, plus a thousandth of its length, so that the
  // advantages, losses and gradients are not all 0.
  const std::string score = std::string("'") + AMPT_PYTHON + "' '" + AMPT_SOURCE_DIR "/tests/reward/programs/score.py'";
  check_grpo_rerun_and_resume(dir, write_prompts(dir),
                         {"--tokenizer", dir + "/bytes.tiktoken", "--vocab_size", "257", "--reward", "program",
                          "--reward_command", score});
  CHECK_THAT(read_file(dir + "/a/metrics.jsonl"), Catch::Contains("\"rewards/program/mean\""));
  // A random model's byte tokens end completions inside characters; TRL's batch_decode reads them
  // with U+FFFD, and so do the rewards and completions.jsonl.
  const auto shown = read_file(dir + "/a/completions.jsonl");
  CHECK(ampt::text::first_invalid_utf8(shown) == shown.size());
  CHECK_THAT(shown, Catch::Contains("\xEF\xBF\xBD"));
}

TEST_CASE("grpo: a reward program that crashes stops the run with a checkpoint, in one line",
          "[train][grpo][cli][errors]") {
  if (!std::filesystem::exists(kGrpoTokenizer)) AMPT_SKIP(reference, "skipping: .deps/gpt2.tiktoken missing");
  const auto dir = make_temp_dir();
  const auto prompts = write_prompts(dir);
  const auto r = run_ampt(grpo_args(prompts, dir + "/out", {"--reward", "program", "--reward_command", "exit 3"}));
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Catch::Contains("training stopped after step 0: "));
  CHECK_THAT(r.err, Catch::Contains("saved " + dir + "/out/ckpt-00000000.pt"));
  CHECK(lines_with(r.err, "\n").size() <= 1);
}

TEST_CASE("grpo: each bad setting or prompt record is one line naming it", "[train][grpo][cli][errors]") {
  if (!std::filesystem::exists(kGrpoTokenizer)) AMPT_SKIP(reference, "skipping: .deps/gpt2.tiktoken missing");
  const auto dir = make_temp_dir();
  const auto prompts = write_prompts(dir);
  const auto refused = [&](const std::string& data, std::vector<std::string> extra, const std::string& message) {
    const auto r = run_ampt(grpo_args(data, dir + "/refused", std::move(extra)));
    INFO(r.out << r.err);
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, Catch::Contains(message));
    CHECK_FALSE(std::filesystem::exists(dir + "/refused/metrics.jsonl"));
  };
  const auto no_prompt = dir + "/no_prompt.jsonl";
  write_file(no_prompt, R"({"question": "2+2?", "answer": "4"})" "\n");
  refused(no_prompt, {}, no_prompt + ": line 1: no \"prompt\" (the record has question, answer)");
  const auto no_answer = dir + "/no_answer.jsonl";
  write_file(no_answer, R"({"prompt": "2+2?", "solution": "4"})" "\n");
  refused(no_answer, {}, "answer");
  refused(prompts, {"--reward", "speed"}, "speed");
  refused(prompts, {"--num_generations", "1", "--grad_accum_steps", "1"},
          "num_generations 1 (flag --num_generations) leaves each prompt a group of one, whose reward std is 0");
  refused(prompts, {"--num_generations", "3"},
          "num_generations 3 (flag --num_generations) does not divide the 8 completions a step samples");
  refused(prompts, {"--max_completion_length", "30"},
          prompts + ": line 1: the prompt's 4 tokens and max_completion_length 30 exceed the model's context of 32 positions");
  const auto r = run_ampt({"train", "--model", "gpt", "--objective", "dpo", "--num_generations", "4",
                           "--output_dir", dir + "/dpo"});
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Catch::Contains("num_generations (flag --num_generations) is an option of the grpo and "
                                    "distill objectives, and this run's objective is dpo"));
}
