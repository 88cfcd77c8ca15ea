// The ampt binary run as a real process: subcommands, exit codes and one-line errors.
#include "support/process.h"

#include <catch2/catch.hpp>

#include <algorithm>

using ampt::test::make_temp_dir;
using ampt::test::ProcessResult;
using ampt::test::run_ampt;
using ampt::test::write_file;

namespace {

// A failed run prints exactly one line, `ampt: error: ...`, on stderr: no stack trace, no abort.
void check_one_line_error(const ProcessResult& r, int exit_code, const std::string& expected) {
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == exit_code);
  CHECK_THAT(r.err, Catch::StartsWith("ampt: error: "));
  CHECK_THAT(r.err, Catch::Contains(expected));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK_THAT(r.err, !Catch::Contains("terminate") && !Catch::Contains("Exception raised from"));
}

}  // namespace

TEST_CASE("cli: --help, --version and bare ampt", "[cli]") {
  const auto help = run_ampt({"--help"});
  CHECK(help.exit_code == 0);
  CHECK_THAT(help.out, Catch::Contains("train") && Catch::Contains("config"));

  const auto version = run_ampt({"--version"});
  CHECK(version.exit_code == 0);
  CHECK_THAT(version.out, Catch::StartsWith("ampt 0.1.0 (git "));
  CHECK_THAT(version.out, Catch::Contains("LibTorch 2.11.0"));
  // The binary allocates through tcmalloc, linked ahead of glibc's malloc.
  CHECK_THAT(version.out, Catch::EndsWith(", malloc tcmalloc)\n"));

  const auto bare = run_ampt({});
  CHECK(bare.exit_code == 2);
  CHECK_THAT(bare.err, Catch::StartsWith("usage: ampt <command>"));

  const auto train_help = run_ampt({"train", "--help"});
  CHECK(train_help.exit_code == 0);
  CHECK_THAT(train_help.out, Catch::Contains("--mixed_precision") &&
                                 Catch::Contains("--grad_scaler_init") &&
                                 Catch::Contains("AMPT_<NAME>"));
}

TEST_CASE("cli: usage errors exit 2 with one line naming the mistake", "[cli][errors]") {
  check_one_line_error(run_ampt({"trian"}), 2, "unknown command 'trian' (did you mean 'train'?)");
  check_one_line_error(run_ampt({"train", "--bach_size", "8"}), 2,
                       "unknown flag '--bach_size' (did you mean '--batch_size'?)");
  check_one_line_error(run_ampt({"train", "--batch_size", "abc"}), 2,
                       "invalid value 'abc' for batch_size (flag --batch_size)");
  check_one_line_error(run_ampt({"train", "--mixed_precision", "fp64"}), 2,
                       "expected one of no, fp16, bf16, auto, fp8");
  check_one_line_error(run_ampt({"train", "--grad_scaler_backoff", "1.5"}), 2,
                       "grad_scaler_backoff");
  check_one_line_error(run_ampt({"config", "--batch_size"}), 2, "--batch_size needs a value");
}

TEST_CASE("cli: bad AMPT_ environment variables exit 2", "[cli][errors]") {
  check_one_line_error(run_ampt({"config"}, {{"AMPT_BATCH_SIZ", "3"}}), 2,
                       "unknown environment variable AMPT_BATCH_SIZ (did you mean AMPT_BATCH_SIZE?)");
  check_one_line_error(run_ampt({"config"}, {{"AMPT_BATCH_SIZE", "-3"}}), 2,
                       "invalid value '-3' for batch_size (env AMPT_BATCH_SIZE)");
}

TEST_CASE("cli: bad YAML exits 2 naming file, line and column", "[cli][errors]") {
  const auto dir = make_temp_dir();
  write_file(dir + "/typo.yaml", "training:\n  bach_size: 8\n");
  check_one_line_error(run_ampt({"config", "--config", dir + "/typo.yaml"}), 2,
                       "unknown key 'bach_size' in " + dir + "/typo.yaml:2");
  write_file(dir + "/value.yaml", "amp:\n  mixed_precision: fp4\n");
  check_one_line_error(run_ampt({"train", "--config", dir + "/value.yaml"}), 2,
                       "invalid value 'fp4' for mixed_precision (" + dir + "/value.yaml:2)");
  write_file(dir + "/broken.yaml", "training:\n  batch_size: [8\n");
  check_one_line_error(run_ampt({"config", "--config", dir + "/broken.yaml"}), 2,
                       "malformed YAML in " + dir + "/broken.yaml:");
  check_one_line_error(run_ampt({"config", "--config", dir + "/missing.yaml"}), 2,
                       "cannot read config file '" + dir + "/missing.yaml'");
}

TEST_CASE("cli: config shows precedence default < YAML < env < flag with sources", "[cli][config]") {
  const auto dir = make_temp_dir();
  write_file(dir + "/run.yaml",
             "training:\n  batch_size: 16\n  lr: 0.01\n  epochs: 7\nuse_amp: true\namp_dtype: float16\n");
  const auto r = run_ampt({"config", "--config", dir + "/run.yaml", "--batch_size", "64"},
                          {{"AMPT_BATCH_SIZE", "32"}, {"AMPT_LR", "0.02"}});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Matches("(.|\n)*batch_size +\\= 64 +\\(flag --batch_size\\)(.|\n)*"));
  CHECK_THAT(r.out, Catch::Matches("(.|\n)*lr +\\= 0\\.02 +\\(env AMPT_LR\\)(.|\n)*"));
  CHECK_THAT(r.out, Catch::Matches("(.|\n)*epochs +\\= 7 +\\(" + dir + "/run\\.yaml:4\\)(.|\n)*"));
  CHECK_THAT(r.out, Catch::Matches("(.|\n)*mixed_precision +\\= fp16 +\\(" + dir + "/run\\.yaml:6\\)(.|\n)*"));
  CHECK_THAT(r.out, Catch::Matches("(.|\n)*seed +\\= \\d+ +\\(default\\)(.|\n)*"));
}

TEST_CASE("cli: runtime errors exit 1 with one line", "[cli][errors]") {
  const auto dir = make_temp_dir();
  write_file(dir + "/file", "not a directory");
  check_one_line_error(run_ampt({"train", "--output_dir", dir + "/file/out", "--max_steps", "1"}),
                       1, "cannot create output_dir");
  // One sample, and val_fraction 0.5 holds it out: nothing is left to train on.
  check_one_line_error(
      run_ampt({"train", "--output_dir", dir + "/small", "--synthetic_samples", "1",
                "--val_fraction", "0.5", "--device", "cpu"}),
      1, "the training split of synthetic is empty: add data or lower val_fraction");
}
