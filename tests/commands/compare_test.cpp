// `ampt compare`: the table's arithmetic and stability labels, and whole runs of the binary that
// prove every format starts from the same weights and batches as a plain `ampt train`.
#include "ampt/commands/compare.h"
#include "ampt/commands/compare_report.h"

#include "support/process.h"

#include <catch2/catch.hpp>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

using ampt::commands::CompareReport;
using ampt::commands::FormatResult;
using ampt::commands::stability;

namespace {

FormatResult result(const std::string& format, double initial, double final_loss, int64_t skipped,
                    int64_t peak, double samples_per_sec) {
  FormatResult r;
  r.format = format;
  r.steps = 100;
  r.initial_loss = initial;
  r.final_loss = final_loss;
  r.skipped_steps = skipped;
  r.peak_memory_bytes = peak;
  r.samples_per_sec = samples_per_sec;
  r.tokens_per_sec = samples_per_sec * 64;
  r.peak_memory_kind = "process peak RSS";
  return r;
}

// A small, quick classifier configuration shared by the whole-process tests.
std::vector<std::string> tiny_run(const std::string& dir) {
  return {"--device", "cpu", "--mlp_hidden", "32", "--mlp_layers", "2", "--batch_size", "32",
          "--synthetic_samples", "2048", "--log_every", "10", "--eval_batches", "2",
          "--output_dir", dir};
}

}  // namespace

TEST_CASE("compare stability: ok, overflows, diverged, stopped, failed", "[compare]") {
  CHECK(stability(result("fp32", 2.3, 1.0, 0, 1, 1), 100) == "ok");
  CHECK(stability(result("fp16", 2.3, 1.0, 3, 1, 1), 100) == "3 overflows");
  CHECK(stability(result("fp16", 2.3, 1.0, 1, 1, 1), 100) == "1 overflow");
  CHECK(stability(result("fp16", 2.3, std::numeric_limits<double>::quiet_NaN(), 0, 1, 1), 100) ==
        "diverged");
  CHECK(stability(result("fp16", 2.3, 2.3 * 1.21, 0, 1, 1), 100) == "diverged");
  CHECK(stability(result("fp16", 2.3, 2.3, 51, 1, 1), 100) == "diverged");
  CHECK(stability(result("fp16", 2.3, 2.3 * 1.19, 50, 1, 1), 100) == "50 overflows");
  auto stopped = result("bf16", 2.3, 1.0, 0, 1, 1);
  stopped.steps = 40;
  CHECK(stability(stopped, 100) == "stopped at step 40");
  FormatResult failed;
  failed.error = "no CUDA device";
  CHECK(stability(failed, 100) == "failed: no CUDA device");
}

TEST_CASE("compare table: ratios and loss differences are taken against fp32", "[compare]") {
  CompareReport report;
  report.steps = 100;
  report.baseline = "fp32";
  report.results = {result("fp32", 2.3, 1.0, 0, 400 << 20, 1000),
                    result("bf16", 2.3, 1.0125, 0, 200 << 20, 2500),
                    result("fp16", 2.3, 0.9875, 4, 220 << 20, 2000)};
  const auto md = ampt::commands::compare_markdown(report);
  CHECK_THAT(md, Catch::Contains("| Format | Peak memory | Memory vs fp32 | Throughput | Speed vs "
                                 "fp32 | Final loss | Δ loss vs fp32 | Skipped steps | Stability |"));
  CHECK_THAT(md, Catch::Contains("| fp32 | 400.0 MiB | 1.00× | 1000 samples/s | 1.00× | 1.0000 | "
                                 "+0.0000 | 0 of 100 | ok |"));
  CHECK_THAT(md, Catch::Contains("| bf16 | 200.0 MiB | 0.50× | 2500 samples/s | 2.50× | 1.0125 | "
                                 "+0.0125 | 0 of 100 | ok |"));
  CHECK_THAT(md, Catch::Contains("| fp16 | 220.0 MiB | 0.55× | 2000 samples/s | 2.00× | 0.9875 | "
                                 "-0.0125 | 4 of 100 | 4 overflows |"));

  report.language_model = true;
  const auto json = YAML::Load(ampt::commands::compare_json(report));
  CHECK(json["throughput_unit"].as<std::string>() == "tokens/s");
  CHECK(json["formats"][1]["throughput"].as<double>() == 2500.0 * 64);
  CHECK(json["formats"][1]["speed_vs_baseline"].as<double>() == Approx(2.5));
  CHECK(json["formats"][2]["delta_loss_vs_baseline"].as<double>() == Approx(-0.0125));
  CHECK(json["formats"][2]["stability"].as<std::string>() == "4 overflows");

  const auto csv = ampt::commands::compare_csv(report);
  CHECK_THAT(csv, Catch::StartsWith("format,peak_memory_bytes,memory_vs_baseline,throughput,"));
  CHECK_THAT(csv, Catch::Contains("\nbf16,209715200,0.5,160000,tokens/s,2.5,1.0125,"));
}

TEST_CASE("compare table: without fp32 the first format is the baseline, a failed run has no numbers",
          "[compare]") {
  CompareReport report;
  report.steps = 100;
  report.baseline = "bf16";
  FormatResult failed;
  failed.format = "fp16";
  failed.error = "cannot open data";
  report.results = {result("bf16", 2.3, 1.0, 0, 100 << 20, 1000), failed};
  const auto md = ampt::commands::compare_markdown(report);
  CHECK_THAT(md, Catch::Contains("| Memory vs bf16 |"));
  CHECK_THAT(md, Catch::Contains("| fp16 | – | – | – | – | – | – | – | failed: cannot open data |"));
  const auto json = YAML::Load(ampt::commands::compare_json(report));
  CHECK(json["formats"][1]["final_loss"].IsNull());
}

TEST_CASE("cli compare: fp32, bf16 and fp16 from the same weights and batches as ampt train",
          "[compare][cli]") {
  const auto dir = ampt::test::make_temp_dir();
  auto args = tiny_run(dir + "/cmp");
  args.insert(args.begin(), {"compare", "--steps", "30"});
  const auto r = ampt::test::run_ampt(args);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("| Format | Peak memory | Memory vs fp32 |"));
  // The default formats: fp8 only where the device has it, and one line says why not here.
  CHECK_THAT(r.out, Catch::Contains("[compare] fp8 not compared: mixed_precision fp8 needs a CUDA "
                                    "GPU of compute capability 8.9 or newer"));
  for (const auto* f : {"fp32", "bf16", "fp16"}) {
    CHECK_THAT(r.out, Catch::Contains(std::string("| ") + f + " | "));
  }
  const auto json = YAML::LoadFile(dir + "/cmp/compare.json");
  REQUIRE(json["formats"].size() == 3);
  CHECK(json["baseline"].as<std::string>() == "fp32");
  CHECK(json["formats"][0]["memory_vs_baseline"].as<double>() == 1.0);
  CHECK(ampt::test::read_file(dir + "/cmp/compare.md").find("| bf16 | ") != std::string::npos);
  CHECK(ampt::test::read_file(dir + "/cmp/compare.csv").find("\nfp16,") != std::string::npos);

  // The same configuration trained directly in fp32 ends on exactly the fp32 row's loss.
  auto direct = tiny_run(dir + "/direct");
  direct.insert(direct.begin(), {"train", "--mixed_precision", "no", "--max_steps", "30"});
  const auto d = ampt::test::run_ampt(direct);
  REQUIRE(d.exit_code == 0);
  const auto summary = YAML::LoadFile(dir + "/direct/summary.json");
  CHECK(json["formats"][0]["final_loss"].as<double>() == summary["final_loss"].as<double>());
  // Same initial weights and first batch in every format: step 1's losses differ only by the
  // half-precision rounding of the forward pass.
  const double fp32_initial = json["formats"][0]["initial_loss"].as<double>();
  for (std::size_t i = 1; i < 3; ++i) {
    INFO(json["formats"][i]["format"].as<std::string>());
    CHECK(std::abs(json["formats"][i]["initial_loss"].as<double>() - fp32_initial) < 5e-3);
    CHECK(std::abs(json["formats"][i]["delta_loss_vs_baseline"].as<double>()) < 0.05);
    CHECK(json["formats"][i]["stability"].as<std::string>() == "ok");
  }
}

TEST_CASE("cli compare: bad formats and settings compare owns are one-line usage errors",
          "[compare][cli]") {
  const auto dir = ampt::test::make_temp_dir();
  const auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"compare", "--output_dir", dir};
    args.insert(args.end(), extra.begin(), extra.end());
    return ampt::test::run_ampt(args);
  };
  auto r = run({"--formats", "fp32,bf61"});
  CHECK(r.exit_code == 2);
  CHECK(r.err == "ampt: error: invalid value 'fp32,bf61' for formats (flag --formats): unknown format "
                 "'bf61' (did you mean 'bf16'?): expected auto or a comma-separated list of fp32, "
                 "bf16, fp16, fp8\n");
  r = run({"--formats", "fp32,fp32"});
  CHECK(r.exit_code == 2);
  CHECK(r.err == "ampt: error: invalid value 'fp32,fp32' for formats (flag --formats): format 'fp32' "
                 "is listed twice\n");
  r = run({"--steps", "0"});
  CHECK(r.exit_code == 2);
  CHECK(r.err == "ampt: error: invalid value '0' for steps (flag --steps): expected an integer >= 1\n");
  r = run({"--mixed_precision", "bf16"});
  CHECK(r.exit_code == 2);
  CHECK(r.err == "ampt: error: ampt compare sets --mixed_precision for each run: use --formats\n");
  r = run({"--max_steps=5"});
  CHECK(r.exit_code == 2);
  CHECK(r.err == "ampt: error: ampt compare sets --max_steps for each run: use --steps\n");
  r = run({"--bach_size", "8"});
  CHECK(r.exit_code == 2);
  CHECK(r.err == "ampt: error: unknown flag '--bach_size' (did you mean '--batch_size'?)\n");
  // fp8 on a CPU is refused before any format runs.
  r = run({"--device", "cpu", "--formats", "fp32,fp8"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::StartsWith("ampt: error: format fp8: mixed_precision fp8 needs a CUDA GPU"));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  // Nothing ran.
  CHECK_FALSE(std::filesystem::exists(dir + "/fp32"));

  r = ampt::test::run_ampt({"compare", "--help"});
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("--formats LIST"));
  CHECK_THAT(r.out, Catch::Contains("--batch_size"));
}
