// Every bad checkpoint stops the run with one line naming the file and the problem, exit 1,
// and nothing in output_dir changes.
#include "ampt/checkpoint/atomic_file.h"
#include "ampt/checkpoint/checkpoint.h"

#include "support/process.h"

#include <catch2/catch.hpp>
#include <torch/serialize.h>

#include <unistd.h>

#include <filesystem>

namespace fs = std::filesystem;
using ampt::test::read_file;
using ampt::test::run_ampt;

namespace {

const std::vector<std::string> kSmall = {"--device", "cpu", "--synthetic_samples", "512",
                                         "--mlp_hidden", "32", "--batch_size", "32", "--log_every", "5"};

std::vector<std::string> train_args(const std::string& dir, std::vector<std::string> extra) {
  std::vector<std::string> args{"train", "--output_dir", dir};
  args.insert(args.end(), kSmall.begin(), kSmall.end());
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    files[entry.path().filename().string()] = read_file(entry.path().string());
  }
  return files;
}

// Trains 10 steps into a fresh directory and returns it.
std::string trained_dir() {
  const auto dir = ampt::test::make_temp_dir();
  const auto r = run_ampt(train_args(dir, {"--max_steps", "10"}));
  REQUIRE(r.exit_code == 0);
  return dir;
}

void check_refused(const std::string& dir, const std::vector<std::string>& extra,
                   const std::string& expected) {
  const auto before = snapshot(dir);
  const auto r = run_ampt(train_args(dir, extra));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::StartsWith("ampt: error: ") && Catch::Contains(expected));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  // torch's own errors (a corrupt archive's) keep their backtrace out of every line.
  CHECK_THAT(r.out + r.err, !Catch::Contains("frame #") && !Catch::Contains("Exception raised"));
  CHECK(snapshot(dir) == before);
}

}  // namespace

TEST_CASE("bad checkpoint: missing file", "[checkpoint][errors]") {
  const auto dir = trained_dir();
  check_refused(dir, {"--resume", dir + "/nope.pt", "--max_steps", "20"},
                "checkpoint '" + dir + "/nope.pt' not found");
}

TEST_CASE("checkpoint: a run directory or its latest file names the latest checkpoint",
          "[checkpoint]") {
  const auto dir = trained_dir();
  const auto saved = ampt::checkpoint::load(dir + "/ckpt-00000010.pt");
  for (const auto& path : {dir, dir + "/latest"}) {
    INFO(path);
    const auto latest = ampt::checkpoint::load(path);
    CHECK(latest.step == saved.step);
    CHECK(latest.config == saved.config);
  }
  const auto empty = ampt::test::make_temp_dir();
  CHECK_THROWS_WITH(ampt::checkpoint::load(empty),
                    "checkpoint '" + empty + "' not found: no " + empty +
                        "/latest pointer (a run directory has one once it saved)");
}

TEST_CASE("bad checkpoint: truncated and corrupt files", "[checkpoint][errors]") {
  const auto dir = trained_dir();
  const auto good = read_file(dir + "/ckpt-00000010.pt");
  const auto truncated = dir + "/truncated.pt";
  ampt::test::write_file(truncated, good.substr(0, good.size() / 2));
  check_refused(dir, {"--resume", truncated, "--max_steps", "20"},
                "checkpoint '" + truncated + "' is truncated or corrupt");

  auto flipped = good;
  for (size_t i = flipped.size() / 3; i < flipped.size() / 3 + 64; ++i) flipped[i] ^= 0x5A;
  const auto corrupt = dir + "/corrupt.pt";
  ampt::test::write_file(corrupt, flipped);
  check_refused(dir, {"--resume", corrupt, "--max_steps", "20"}, "checkpoint '" + corrupt + "'");

  const auto empty = dir + "/empty.pt";
  ampt::test::write_file(empty, "");
  check_refused(dir, {"--resume", empty, "--max_steps", "20"}, "checkpoint '" + empty + "'");
}

TEST_CASE("bad checkpoint: a file that is not an ampt checkpoint", "[checkpoint][errors]") {
  const auto dir = trained_dir();
  const auto bytes = torch::pickle_save(torch::ones({3}));
  const auto foreign = dir + "/foreign.pt";
  ampt::test::write_file(foreign, std::string(bytes.begin(), bytes.end()));
  check_refused(dir, {"--resume", foreign, "--max_steps", "20"},
                "checkpoint '" + foreign + "' cannot be used: it is not an ampt checkpoint");
}

TEST_CASE("bad checkpoint: another model shape names the tensor and both shapes", "[checkpoint][errors]") {
  const auto dir = trained_dir();
  check_refused(dir, {"--resume", "auto", "--max_steps", "20", "--mlp_hidden", "48"},
                "checkpoint '" + dir + "/ckpt-00000010.pt': model tensor 'blocks.0.weight' has "
                "shape [32, 32], the model expects [48, 32]");
  check_refused(dir, {"--resume", "auto", "--max_steps", "20", "--mlp_layers", "4"},
                "has no model tensor 'blocks.3.weight'");
  check_refused(dir, {"--resume", "auto", "--max_steps", "20", "--optimizer", "sgd"},
                "was saved with optimizer adamw, this run uses sgd");
}

TEST_CASE("bad checkpoint: a newer format version", "[checkpoint][errors]") {
  const auto dir = trained_dir();
  auto newer = ampt::checkpoint::load(dir + "/ckpt-00000010.pt");
  newer.format_version = ampt::checkpoint::kFormatVersion + 1;
  newer.step = 11;
  const auto future_dir = ampt::test::make_temp_dir();
  const auto path = ampt::checkpoint::save(future_dir, newer, 3);
  check_refused(dir, {"--resume", path, "--max_steps", "20"},
                "has format version 2, newer than the 1 this ampt reads");
}

TEST_CASE("bad checkpoint: another objective's run is not resumed", "[checkpoint][errors]") {
  const auto dir = trained_dir();
  auto grpo = ampt::checkpoint::load(dir + "/ckpt-00000010.pt");
  CHECK(grpo.objective == "lm");
  grpo.objective = "grpo";
  const auto grpo_dir = ampt::test::make_temp_dir();
  const auto path = ampt::checkpoint::save(grpo_dir, grpo, 3);
  check_refused(dir, {"--resume", path, "--max_steps", "20"},
                "checkpoint '" + path + "' was saved by an --objective grpo run, this run's is lm: "
                "--resume continues the run that saved it; to start lm from its weights, `ampt "
                "export --checkpoint " + path + " --format hf --out DIR` and give --init_from DIR");
}

TEST_CASE("atomic write: replaces the file whole and leaves no temporary", "[checkpoint]") {
  const auto dir = ampt::test::make_temp_dir();
  const auto path = dir + "/file";
  ampt::checkpoint::write_file_atomically(path, "first");
  // Larger than the writeback chunk: written in pieces, handed to the disk as it goes.
  const std::string large((uint64_t{80} << 20) + 123, 'x');
  ampt::checkpoint::write_file_atomically(path, large);
  CHECK(read_file(path) == large);
  ampt::checkpoint::write_file_atomically(path, "second, longer");
  CHECK(read_file(path) == "second, longer");
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1);
  CHECK_THROWS_WITH(ampt::checkpoint::write_file_atomically(dir + "/missing/file", "x"),
                    "cannot create a temporary file for '" + dir + "/missing/file' (" + dir +
                        "/missing/.file.tmp-" + std::to_string(::getpid()) +
                        "): No such file or directory (ENOENT)");
}

TEST_CASE("atomic write: an abandoned file leaves the previous one and no temporary", "[checkpoint]") {
  const auto dir = ampt::test::make_temp_dir();
  ampt::checkpoint::write_file_atomically(dir + "/file", "previous");
  {
    ampt::checkpoint::AtomicFile file(dir + "/file");
    file.write("half of it", 10);
    CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 2);
  }  // never committed, as when the writer fails
  CHECK(read_file(dir + "/file") == "previous");
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1);
}
