// Whole-program data parallelism: several ampt processes on loopback with Gloo, against one
// process with the same global batch; lost ranks, unreachable masters, mismatched world sizes.
#include "ampt/checkpoint/checkpoint.h"
#include "ampt/data/registry.h"
#include "ampt/models/registry.h"
#include "support/json_field.h"
#include "rank_processes.h"
#include "support/process.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <csignal>
#include <memory>
#include <numeric>

using namespace ampt::test;

namespace {

// A tiny MLP run, small enough for several processes on a shared two-core machine.
std::vector<std::string> train_args(const std::string& out, int64_t batch, int64_t steps,
                                    const std::string& precision, int64_t accum = 1) {
  return {AMPT_BINARY, "train", "--output_dir", out, "--mlp_hidden", "16", "--mlp_layers", "2",
          "--synthetic_features", "8", "--synthetic_samples", "768", "--batch_size",
          std::to_string(batch), "--grad_accum_steps", std::to_string(accum), "--max_steps",
          std::to_string(steps), "--optimizer", "sgd", "--lr", "0.2", "--warmup_steps", "0",
          "--log_every", "1", "--loader_workers", "0", "--eval_batches", "1",
          "--mixed_precision", precision, "--seed", "11", "--dist_timeout", "30"};
}

ampt::NamedTensors final_weights(const std::string& dir) {
  const auto latest = ampt::checkpoint::find_latest(dir);
  REQUIRE(latest);
  return ampt::checkpoint::load(*latest).model;
}

// The last evaluation line of a run's metrics.jsonl.
std::string last_eval(const std::string& dir) {
  const auto evals = lines_with(read_file(dir + "/metrics.jsonl"), "\"val_loss\"");
  REQUIRE_FALSE(evals.empty());
  return evals.back();
}

void check_like_one_process(int world, const std::string& precision, int64_t accum, double tol) {
  const auto dir = make_temp_dir();
  const int64_t batch = 8;
  const int64_t steps = 6;
  const auto ranks = run_rank_processes(world, train_args(dir + "/ranks", batch, steps, precision, accum),
                               dir + "/logs");
  for (int r = 0; r < world; ++r) {
    INFO("rank " << r << " stdout:\n" << ranks.out[r] << "\nstderr:\n" << ranks.err[r]);
    // Exit 0 also says every rank ended with rank 0's weights bit for bit (checked at the end).
    REQUIRE(ranks.status[r] == 0);
  }
  CHECK_THAT(ranks.out[0], Catch::Contains(fmt::format("[DIST] {} ranks, gloo backend", world)));
  CHECK_THAT(ranks.out[0], Catch::Contains(fmt::format("global batch {}", world * batch * accum)));
  CHECK(ranks.out[1].empty());  // rank 0 alone logs

  const auto single = run_process(
      train_args(dir + "/single", batch * world, steps, precision, accum), {{"OMP_NUM_THREADS", "1"}});
  INFO(single.err);
  REQUIRE(single.exit_code == 0);

  const auto a = final_weights(dir + "/ranks");
  const auto b = final_weights(dir + "/single");
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first << ": max difference " << (a[i].second - b[i].second).abs().max().item<double>());
    CHECK(torch::allclose(a[i].second, b[i].second, tol, tol));
  }
  CHECK(std::filesystem::exists(dir + "/ranks/metrics.jsonl"));
  CHECK_FALSE(std::filesystem::exists(dir + "/ranks/rank1"));

  // The ranks share out the validation batch: the same samples as the one process's batch.
  const double ranks_val = json_field(last_eval(dir + "/ranks"), "val_loss");
  const double single_val = json_field(last_eval(dir + "/single"), "val_loss");
  CHECK(ranks_val == Approx(single_val).epsilon(10 * tol));
  if (precision == "no") {  // in bf16 a near tie may fall either way
    CHECK(json_field(last_eval(dir + "/ranks"), "val_accuracy") ==
          json_field(last_eval(dir + "/single"), "val_accuracy"));
  }
}

}  // namespace

TEST_CASE("2 Gloo ranks train like one process with the global batch in fp32", "[dist][cli]") {
  check_like_one_process(2, "no", 1, 1e-6);
}

TEST_CASE("3 Gloo ranks with accumulation train like one process in fp32", "[dist][cli]") {
  check_like_one_process(3, "no", 2, 1e-6);
}

TEST_CASE("2 Gloo ranks train like one process with the global batch in bf16", "[dist][cli]") {
  check_like_one_process(2, "bf16", 1, 3e-3);
}

TEST_CASE("3 Gloo ranks train like one process with the global batch in bf16", "[dist][cli]") {
  check_like_one_process(3, "bf16", 1, 3e-3);
}

TEST_CASE("a killed rank makes the others stop within the timeout naming it", "[dist][cli]") {
  const int victim = GENERATE(0, 1);
  const auto dir = make_temp_dir();
  auto argv = train_args(dir + "/out", 8, 1000000, "no");
  argv.insert(argv.end(), {"--dist_timeout", "10", "--synthetic_samples", "65536"});
  check_lost_rank_is_named(argv, victim, dir);
}

TEST_CASE("an unreachable master is an error naming host and port", "[dist][cli]") {
  const auto dir = make_temp_dir();
  const int port = free_port();
  auto argv = train_args(dir + "/out", 8, 2, "no");
  argv.insert(argv.end(), {"--dist_timeout", "2"});
  const auto result = run_process(argv, rank_env(1, 2, port));
  CHECK(result.exit_code == 1);
  CHECK_THAT(result.err, Catch::StartsWith(fmt::format(
                             "ampt: error: rank 1 cannot reach the rendezvous at 127.0.0.1:{} "
                             "within 2 s (dist_timeout)",
                             port)));
  CHECK(std::count(result.err.begin(), result.err.end(), '\n') == 1);
}

TEST_CASE("a missing rank and a mismatched world size are errors", "[dist][cli]") {
  const auto dir = make_temp_dir();
  auto argv = train_args(dir + "/out", 8, 2, "no");
  argv.insert(argv.end(), {"--dist_timeout", "2"});
  const int port = free_port();
  const auto alone = run_process(argv, rank_env(0, 3, port));
  CHECK(alone.exit_code == 1);
  CHECK_THAT(alone.err, Catch::Contains("rank 0: ranks 1, 2 of 3 did not join the rendezvous at "
                                        "127.0.0.1:" + std::to_string(port) + " within 2 s"));

  const int port2 = free_port();
  std::filesystem::create_directories(dir + "/rank0");
  std::filesystem::create_directories(dir + "/rank1");
  Child rank0(argv, dir + "/rank0", rank_env(0, 2, port2));
  auto three = rank_env(1, 3, port2);
  Child rank1(argv, dir + "/rank1", three);
  CHECK(rank0.wait() == 1);
  CHECK(rank1.wait() == 1);
  CHECK_THAT(rank0.err() + rank1.err(), Catch::Contains("with world size"));
  CHECK_THAT(rank0.err() + rank1.err(), Catch::Contains("every rank needs the same WORLD_SIZE"));
}

TEST_CASE("a 2-rank checkpoint resumed by one process reads on from the same sample",
          "[dist][cli][checkpoint]") {
  const auto dir = make_temp_dir();
  const auto ranks = run_rank_processes(2, train_args(dir + "/out", 8, 3, "no"), dir + "/logs");
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << ":\n" << ranks.err[r]);
    REQUIRE(ranks.status[r] == 0);
  }
  auto argv = train_args(dir + "/out", 8, 5, "no");
  argv.insert(argv.end(), {"--resume", "auto"});
  const auto single = run_process(argv, {{"OMP_NUM_THREADS", "1"}});
  INFO(single.out << single.err);
  REQUIRE(single.exit_code == 0);
  // 3 global batches of 16 samples: one process of batch 8 is at batch 6 of the same epoch.
  CHECK_THAT(single.out, Catch::Contains("its batches held 16 samples (2 ranks x batch_size 8), "
                                         "this run's 8 (1 x 8): the data continues at sample 48 "
                                         "of epoch 0"));
  const auto saved = ampt::checkpoint::load(*ampt::checkpoint::find_latest(dir + "/out"));
  CHECK(saved.step == 5);
  CHECK(saved.data_position == 8);
  CHECK(saved.world_size == 1);
  CHECK(saved.batch_size == 8);
}

TEST_CASE("2 Gloo ranks evaluate the CNN with rank 0's BatchNorm statistics", "[dist][cli]") {
  const auto dir = make_temp_dir();
  const std::vector<std::string> argv{
      AMPT_BINARY, "train", "--output_dir", dir + "/out", "--model", "cnn", "--cnn_channels", "8",
      "--synthetic_samples", "320", "--batch_size", "8", "--max_steps", "3", "--eval_batches",
      "1", "--loader_workers", "0", "--mixed_precision", "no", "--seed", "5", "--dist_timeout",
      "30"};
  const auto ranks = run_rank_processes(2, argv, dir + "/logs");
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << ":\n" << ranks.err[r]);
    REQUIRE(ranks.status[r] == 0);
  }
  const double logged = json_field(last_eval(dir + "/out"), "val_loss");

  // Rank 0's saved model on the validation batch the two ranks shared out (samples 0..15): the
  // running statistics each rank gathered from its own slice would give another loss.
  ampt::config::Config config;
  config.model = "cnn";
  config.cnn_channels = 8;
  config.synthetic_samples = 320;
  config.seed = 5;
  const auto splits = ampt::data::open_dataset(config, ampt::models::sample_request(config));
  const auto model = ampt::models::make_model(config, splits.spec);
  ampt::NamedTensors tensors;
  for (const auto& p : model.module->named_parameters()) tensors.emplace_back(p.key(), p.value());
  for (const auto& b : model.module->named_buffers()) tensors.emplace_back(b.key(), b.value());
  const auto latest = *ampt::checkpoint::find_latest(dir + "/out");
  ampt::checkpoint::copy_into(ampt::checkpoint::load(latest).model, tensors, "model", latest);
  model.module->eval();
  torch::NoGradGuard no_grad;
  std::vector<int64_t> first(16);
  std::iota(first.begin(), first.end(), 0);
  const auto batch = splits.val->gather(first);
  const double expected =
      torch::nn::functional::cross_entropy(model.forward(batch.inputs), batch.targets).item<double>();
  CHECK(logged == Approx(expected).epsilon(1e-5));
}
