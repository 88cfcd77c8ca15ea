// Precision schedules, O2 and keep_fp32_modules through the binary, as a user runs them: the
// logged switches and compat report, metrics.jsonl events, and one-line usage errors.
#include "support/json_field.h"
#include "support/process.h"

#include <catch2/catch.hpp>

#include <cmath>

using ampt::test::json_field;
using ampt::test::lines_with;
using ampt::test::make_temp_dir;
using ampt::test::read_file;
using ampt::test::run_ampt;

TEST_CASE("cli train: a schedule fp32 then bf16 then fp16 switches mid-run, the scaler comes with fp16", "[cli][schedule]") {
  const auto dir = make_temp_dir();
  const auto r = run_ampt({"train", "--precision_schedule", "fp32:40,bf16:80,fp16", "--amp_opt_level",
                           "O2", "--max_steps", "120", "--log_every", "10", "--batch_size", "32",
                           "--synthetic_samples", "4096", "--grad_scaler_init", "1024",
                           "--device", "cpu", "--output_dir", dir});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("[AMP] Precision schedule: fp32:40, bf16:80, fp16 (starting in stage 1 of 3)"));
  CHECK_THAT(r.out, Catch::Contains("[AMP] Precision switch at step 40 (epoch 0): FP32 → BF16, stage 2 of 3 (bf16:80); GradScaler off"));
  CHECK_THAT(r.out, Catch::Contains("[AMP] Precision switch at step 80 (epoch 0): BF16 → FP16, stage 3 of 3 (fp16); GradScaler on at init_scale 1024"));
  CHECK_THAT(r.out, Catch::Contains("[AMP] Compat: fp32 modules: "));
  // Loss scaling is off in the log until step 80, on from step 90.
  const auto stats = lines_with(r.out, "[AMP Stats]");
  REQUIRE(stats.size() == 13);  // step 1, then every 10
  for (std::size_t i = 0; i < stats.size(); ++i) {
    INFO(stats[i]);
    CHECK((stats[i].find("Scale: ") != std::string::npos) == (i >= 9));
  }
  const auto metrics = read_file(dir + "/metrics.jsonl");
  const auto events = lines_with(metrics, "\"event\": \"precision_switch\"");
  REQUIRE(events.size() == 2);
  CHECK_THAT(events[0], Catch::StartsWith(R"({"step": 40, "event": "precision_switch", "epoch": 0, "from": "FP32", "to": "BF16")"));
  CHECK_THAT(events[1], Catch::Contains(R"("to": "FP16", "stage": 3, "stages": 3, "stage_text": "fp16", "loss_scaling": true)"));
  for (const auto& line : lines_with(metrics, "\"loss\": ")) {
    INFO(line);
    CHECK(std::isfinite(json_field(line, "loss")));
    // Gradient underflow is counted for the half stages, the ones entered mid-run included.
    CHECK((line.find(R"("grad_underflow": null)") != std::string::npos) ==
          (json_field(line, "step") <= 40));
  }
  const auto summary = read_file(dir + "/summary.json");
  CHECK_THAT(summary, Catch::Contains(R"("precision": "FP32 → BF16 → FP16")"));
  CHECK(json_field(summary, "final_loss") < 0.6 * json_field(summary, "initial_loss"));
  CHECK(json_field(summary, "skipped_steps") == 0);
}

TEST_CASE("cli train: bad schedules, O2 in fp32 and unknown fp32 modules are one-line usage errors", "[cli][schedule]") {
  const auto dir = make_temp_dir();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"--precision_schedule", "fp32:500,bf16:100,fp16"},
       "ampt: error: invalid value 'fp32:500,bf16:100,fp16' for precision_schedule (flag --precision_schedule): stage 2 'bf16:100' ends at step 100"},
      {{"--precision_schedule", "fp8:10,bf16"}, "stage 1 'fp8:10' names precision 'fp8'"},
      {{"--precision_schedule", "bf16,fp16:10"}, "only the last stage may be unbounded"},
      {{"--precision_schedule", "fp32:10,fp16", "--mixed_precision", "bf16"},
       "contradicts precision_schedule 'fp32:10,fp16'"},
      {{"--amp_opt_level", "O2", "--mixed_precision", "no"},
       "amp_opt_level O2 (flag --amp_opt_level) keeps weights in a half dtype"},
      {{"--keep_fp32_modules", "lm_head", "--model", "gpt-tiny"},
       "ampt: error: keep_fp32_modules pattern 'lm_head' matches no module of this model; its modules are wte, wpe, drop, h, h.0, h.0.ln_1"},
  };
  for (const auto& [flags, message] : cases) {
    auto args = std::vector<std::string>{"train", "--device", "cpu", "--max_steps", "1", "--output_dir", dir};
    args.insert(args.end(), flags.begin(), flags.end());
    const auto r = run_ampt(args);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(message));
    CHECK(lines_with(r.err, "error").size() == 1);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
}

TEST_CASE("cli train: O2 on gpt-tiny with keep_fp32_modules reports its fp32 modules and exports fp32 weights", "[cli][o2]") {
  const auto dir = make_temp_dir();
  const auto r = run_ampt({"train", "--model", "gpt-tiny", "--amp_opt_level", "O2", "--mixed_precision",
                           "bf16", "--keep_fp32_modules", "wte", "--max_steps", "30", "--log_every",
                           "10", "--batch_size", "16", "--synthetic_samples", "2048", "--device",
                           "cpu", "--output_dir", dir});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("[AMP] Opt level O2: bf16 weights, activations and gradients"));
  CHECK_THAT(r.out, Catch::Contains("[AMP] Compat: fp32 modules: 6 of"));
  CHECK_THAT(r.out, Catch::Contains("wte (keep_fp32_modules pattern 'wte')"));
  CHECK_THAT(r.out, Catch::Contains("[AMP] Compat: risky: attention softmax in bf16"));
  const auto out = dir + "/model.safetensors";
  const auto e = run_ampt({"export", "--checkpoint", dir + "/ckpt-00000030.pt", "--out", out});
  INFO(e.out << e.err);
  REQUIRE(e.exit_code == 0);
  CHECK_THAT(e.out, Catch::Contains("(fp32)"));
  // The safetensors header names each tensor's dtype: every one is F32.
  const auto header = read_file(out).substr(8, 4000);
  CHECK(header.find("\"BF16\"") == std::string::npos);
  CHECK(header.find("\"F32\"") != std::string::npos);
}
