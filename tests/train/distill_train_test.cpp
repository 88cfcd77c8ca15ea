// --objective distill as whole runs of tiny Llamas on a byte tokenizer, fp32 on the CPU: a teacher
// trained for a few steps on a small corpus and exported as a Hugging Face directory (ampt
// export), a randomly initialised student that samples its own completions of prompts it has never
// seen; the teacher scores them, and over a few dozen steps the student's reverse KL to the
// teacher falls. The log carries distill/reverse_kl and the sampler's figures (mismatch 0 in exact
// mode), the summary the reverse KL first to last, completions.jsonl what the student wrote; the
// same seed gives the same run bit for bit, and a resumed run continues it bit for bit. Each bad
// setting is one line: a teacher of another vocabulary or tokenizer, none, one that is no model,
// --teacher for another objective, rewards for distill.
#include "ampt/text/hf_tokenizer_writer.h"
#include "support/json_field.h"
#include "support/process.h"
#include "text/text_fixtures.h"
#include "train/rollout_runs.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <map>
#include <numeric>
#include <string>
#include <vector>

using namespace ampt::test;

namespace {

// Models this small run fastest on one thread, and a second thread waiting for a busy core makes
// them many times slower.
const std::map<std::string, std::string> kDistillThreads{{"OMP_NUM_THREADS", "1"}};

// The byte tokenizer and prompts of rollout_runs.h, and a teacher: a tiny Llama trained on a
// corpus of a few sentences and exported with that tokenizer beside it.
struct DistillFiles : ByteRolloutFiles {
  std::string teacher;
};

// The student and teacher shape: a Llama preset's tiny dimensions, the byte tokenizer's vocabulary.
std::vector<std::string> distill_model_args(const DistillFiles& files) {
  return {"--model", "llama", "--vocab_size", "257", "--tokenizer", files.tokenizer, "--mixed_precision", "no",
          "--loader_workers", "0", "--device", "cpu"};
}

DistillFiles write_distill_files() {
  DistillFiles files{write_byte_rollout_files(), ""};
  std::string corpus;
  for (int i = 0; i < 100; ++i) corpus += "the cat sat on the mat. the dog ran to the cat. yes no yes no.\n";
  write_file(files.dir + "/corpus.txt", corpus);
  auto args = std::vector<std::string>{"train", "--dataset", "text:" + files.dir + "/corpus.txt", "--block_size",
                                       "32", "--batch_size", "4", "--max_steps", "30", "--lr", "1e-2",
                                       "--output_dir", files.dir + "/trained"};
  const auto model = distill_model_args(files);
  args.insert(args.end(), model.begin(), model.end());
  const auto trained = run_ampt(args, kDistillThreads);
  INFO(trained.out << trained.err);
  REQUIRE(trained.exit_code == 0);
  files.teacher = files.dir + "/teacher";
  const auto exported = run_ampt({"export", "--format", "hf", "--checkpoint", files.dir + "/trained/ckpt-00000030.pt",
                                  "--out", files.teacher},
                                 kDistillThreads);
  INFO(exported.out << exported.err);
  REQUIRE(exported.exit_code == 0);
  return files;
}

std::vector<std::string> distill_args(const DistillFiles& files, const std::string& out, std::vector<std::string> extra) {
  std::vector<std::string> args{"train", "--block_size", "64", "--dataset", "jsonl:" + files.prompts, "--objective",
                                "distill", "--teacher", files.teacher, "--num_generations", "2",
                                "--max_completion_length", "12", "--batch_size", "8", "--grad_accum_steps", "1",
                                "--max_steps", "4", "--log_every", "1", "--lr", "3e-2", "--warmup_steps", "0",
                                "--seed", "5", "--output_dir", out};
  const auto model = distill_model_args(files);
  args.insert(args.end(), model.begin(), model.end());
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

ProcessResult run_distill(const std::vector<std::string>& args) {
  auto r = run_ampt(args, kDistillThreads);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return r;
}

double mean_reverse_kl(const std::vector<std::string>& steps, size_t first, size_t count) {
  double sum = 0;
  for (size_t s = first; s < first + count; ++s) sum += json_field(steps[s], "distill/reverse_kl");
  return sum / static_cast<double>(count);
}

}  // namespace

TEST_CASE("distill: a tiny student sampling its own completions lowers its reverse KL to a tiny teacher",
          "[train][distill][cli]") {
  const auto files = write_distill_files();
  const auto out = files.dir + "/student";
  const auto r = run_distill(distill_args(files, out, {"--max_steps", "40"}));
  CHECK_THAT(r.out, Catch::Contains("distill: each sampled token's reverse KL to the teacher as the negative "
                                    "advantage of an importance-weighted policy gradient, averaged over the "
                                    "step's completion tokens, exact sampler; teacher " + files.teacher));
  CHECK_THAT(r.out, Catch::Contains("frozen, its Linear weights in Float, its vocabulary and tokenizer the "
                                    "student's"));
  CHECK_THAT(r.out, Catch::Contains("Reverse KL:       "));
  const auto steps = rollout_steps(out);
  REQUIRE(steps.size() == 40);
  for (const auto& line : steps) {
    INFO(line);
    // Exact mode: the sampler's log-probabilities are the trainer's, so each ratio is 1 and the loss's
    // value is the mean reverse KL itself.
    CHECK(json_field(line, "mismatch/max_abs_logp") == 0.0);
    CHECK(json_field(line, "loss") == Approx(json_field(line, "distill/reverse_kl")).epsilon(1e-5));
    CHECK(std::isfinite(json_field(line, "entropy")));
    CHECK(json_field(line, "completions/mean_length") >= 1.0);
    CHECK(json_field(line, "completions/mean_length") <= 12.0);
    CHECK(std::isfinite(json_field(line, "completions/clipped_ratio")));
  }
  // The random student's completions are bytes the teacher finds unlikely; the last steps' are far
  // less so (5.7 over the first 5 steps to 1.9 over the last 5 when this test was written).
  const double first = mean_reverse_kl(steps, 0, 5), last = mean_reverse_kl(steps, 35, 5);
  INFO("reverse KL over the first 5 steps " << first << ", over the last 5 " << last);
  CHECK(last < 0.75 * first);
  const auto shown = lines_with(read_file(out + "/completions.jsonl"), "\"completion\"");
  CHECK(shown.size() == 40 * 4);  // a rollout of 4 prompts a step, the first completion of each
  CHECK_THAT(shown.front(), Catch::Contains("\"step\": 1"));
  CHECK_THAT(shown.front(), !Catch::Contains("\"reward\""));
  // A LoRA student of a teacher stored in nf4, in bf16: the exact sampler still agrees with the
  // trainer, and the teacher's weights are held as asked.
  const auto lora = run_distill(distill_args(files, files.dir + "/lora", {"--lora_rank", "4", "--teacher_dtype", "nf4",
                                                                           "--mixed_precision", "bf16"}));
  CHECK_THAT(lora.out, Catch::Contains("frozen, its Linear weights in nf4 ("));
  for (const auto& line : rollout_steps(files.dir + "/lora")) {
    INFO(line);
    CHECK(json_field(line, "mismatch/max_abs_logp") == 0.0);
    CHECK(std::isfinite(json_field(line, "distill/reverse_kl")));
  }
}

TEST_CASE("distill: the same seed gives the same run bit for bit, and a resumed run continues it",
          "[train][distill][cli][checkpoint]") {
  const auto files = write_distill_files();
  check_rerun_and_resume([&](const std::string& out, std::vector<std::string> extra) {
                           return distill_args(files, out, std::move(extra));
                         },
                         files.dir, {"loss", "distill/reverse_kl", "entropy", "grad_norm", "completions/mean_length"},
                         4, kDistillThreads);
}

TEST_CASE("distill: a teacher of the student's tokenizer with a vocabulary padded past the student's "
          "scores the student's tokens",
          "[train][distill][cli]") {
  const auto files = write_distill_files();
  // A teacher of 320 rows over the same 257-token tokenizer (as Qwen2.5-7B's 152064 over 0.5B's 151936).
  auto args = std::vector<std::string>{"train", "--dataset", "text:" + files.dir + "/corpus.txt", "--block_size",
                                       "32", "--batch_size", "4", "--max_steps", "2", "--output_dir",
                                       files.dir + "/trained-wide"};
  auto model = distill_model_args(files);
  *(std::ranges::find(model, "257")) = "320";
  args.insert(args.end(), model.begin(), model.end());
  const auto trained = run_ampt(args, kDistillThreads);
  INFO(trained.out << trained.err);
  REQUIRE(trained.exit_code == 0);
  const auto wide = files.dir + "/wide-teacher";
  const auto exported = run_ampt({"export", "--format", "hf", "--checkpoint",
                                  files.dir + "/trained-wide/ckpt-00000002.pt", "--out", wide},
                                 kDistillThreads);
  INFO(exported.out << exported.err);
  REQUIRE(exported.exit_code == 0);
  auto distill = distill_args(files, files.dir + "/student-wide", {"--max_steps", "2"});
  *(std::ranges::find(distill, "--teacher") + 1) = wide;
  const auto r = run_distill(distill);
  CHECK_THAT(r.out, Catch::Contains("its tokenizer the student's, its vocabulary padded to 320 rows over the "
                                    "student's 257"));
  const auto steps = lines_with(read_file(files.dir + "/student-wide/metrics.jsonl"), "\"distill/reverse_kl\"");
  REQUIRE(steps.size() == 2);
  for (const auto& step : steps) {
    CHECK(json_field(step, "mismatch/max_abs_logp") == 0.0);
    CHECK(std::isfinite(json_field(step, "distill/reverse_kl")));
  }
}

TEST_CASE("distill: each bad teacher or setting is one line naming it", "[train][distill][cli][errors]") {
  const auto files = write_distill_files();
  namespace fs = std::filesystem;
  const auto refused = [&](std::vector<std::string> args, const std::string& message) {
    const auto r = run_ampt(args, kDistillThreads);
    INFO(r.out << r.err);
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, Catch::Contains(message));
    CHECK(lines_with(r.err, "\n").size() <= 1);
  };
  const auto with_teacher = [&](const std::string& teacher,
                                std::vector<std::string> args = {}) {
    if (args.empty()) args = distill_args(files, files.dir + "/refused", {});
    *(std::ranges::find(args, "--teacher") + 1) = teacher;
    return args;
  };
  // A student whose vocabulary passes the teacher's: it could sample ids the teacher has not.
  auto wider = distill_args(files, files.dir + "/refused", {});
  *(std::ranges::find(wider, "257")) = "300";
  refused(wider, "--teacher " + files.teacher + ": its vocabulary of 257 tokens (" + files.teacher +
                     "/config.json) is not the student's 300 (model llama): distillation scores the same token ids "
                     "by both models, which need one tokenizer and a teacher's vocabulary at least the student's");
  // Without tokenizer files to compare, the sizes alone, and they must be equal.
  const auto bare = files.dir + "/bare";
  fs::create_directories(bare);
  for (const auto& entry : fs::directory_iterator(files.teacher)) {
    const auto name = entry.path().filename().string();
    if (name.rfind("tokenizer", 0) != 0 && name != "special_tokens_map.json" && name != "vocab.json" &&
        name != "merges.txt") {
      fs::copy(entry.path(), bare + "/" + name);
    }
  }
  refused(with_teacher(bare, wider), "(a teacher without tokenizer files must have the student's vocabulary size)");
  // As many tokens, another tokenizer: a merge takes the place of a byte's id order.
  const auto other = files.dir + "/other";
  fs::copy(files.teacher, other);
  write_file(other + "/tokenizer.json", ampt::text::tokenizer_json(toy_vocabulary({{"t", "h"}})));
  refused(with_teacher(other), "--teacher " + other + ": its tokenizer (" + other +
                                   "/tokenizer.json) is not the student's (" + files.tokenizer + ")");
  refused(with_teacher(files.dir + "/nowhere"), "teacher '" + files.dir + "/nowhere' is not a directory");
  fs::create_directories(files.dir + "/empty");
  refused(with_teacher(files.dir + "/empty"), "--teacher " + files.dir + "/empty is no Hugging Face model: " +
                                                  files.dir + "/empty/config.json: missing");
  auto no_teacher = distill_args(files, files.dir + "/refused", {});
  no_teacher.erase(std::ranges::find(no_teacher, "--teacher"), std::ranges::find(no_teacher, "--teacher") + 2);
  refused(no_teacher, "--objective distill needs a teacher: --teacher DIR");
  refused(distill_args(files, files.dir + "/refused", {"--reward", "exact"}),
          "reward (flag --reward) is an option of the grpo objective, and this run's objective is distill");
  refused(distill_args(files, files.dir + "/refused", {"--reward_command", "cat"}),
          "reward_command (flag --reward_command) is an option of the grpo objective, and this run's objective "
          "is distill");
  refused({"train", "--model", "llama", "--teacher", files.teacher, "--output_dir", files.dir + "/lm"},
          "teacher (flag --teacher) is an option of the distill objective, and this run's objective is lm");
  refused(distill_args(files, files.dir + "/refused", {"--zero_stage", "3"}),
          "--objective distill under zero_stage 3 would hold its teacher, a second model, whole on every rank");
  CHECK_FALSE(fs::exists(files.dir + "/refused/metrics.jsonl"));
}
