// The step's loss is the mean over every scored target of the step, whatever the split: on
// instruction data whose answers run from 1 to 40 tokens, batch 4, batch 1 x 4 accumulation steps
// and 2 Gloo ranks x batch 2 (plain, ZeRO-2, ZeRO-3) make the same updates from the same
// examples, and so do LoRA's adapters, and packed examples under ZeRO-3 and activation
// checkpointing. Per-micro-batch means weigh a one-token answer like a forty-token one: these
// runs then end apart by most of the largest change (tried: 0.025 to 0.049 of 0.031). The val
// loss of a split does not depend on the evaluation's batch size either.
#include "ampt/checkpoint/checkpoint.h"
#include "data/data_fixtures.h"
#include "distributed/rank_processes.h"
#include "support/json_field.h"
#include "support/process.h"
#include "support/skip.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

using namespace ampt::test;

namespace {

constexpr int kExamples = 24;  // six steps of four

// A GPT-2 token shard of kExamples prompt/answer pairs over a 64-token vocabulary and its loss
// mask (loss_mask.h: bit 1 starts an example, bit 0 scores the token): prompts of 3 to 6 tokens,
// answers of 1 to 40, so the scored targets per example vary forty-fold.
std::string write_instruction_shard(const std::string& dir) {
  std::vector<uint16_t> tokens;
  std::string mask;
  uint32_t state = 12345;
  const auto next = [&](uint32_t below) {
    state = state * 1664525u + 1013904223u;
    return (state >> 8) % below;
  };
  for (int e = 0; e < kExamples; ++e) {
    const int prompt = 3 + static_cast<int>(next(4));
    // Both ends of the range appear: the first example answers in 1 token, the second in 40.
    const int answer = e == 0 ? 1 : e == 1 ? 40 : 1 + static_cast<int>(next(40));
    for (int t = 0; t < prompt + answer; ++t) {
      tokens.push_back(static_cast<uint16_t>(t < prompt ? next(32) : 32 + next(32)));
      mask.push_back(static_cast<char>((t == 0 ? 2 : 0) | (t >= prompt ? 1 : 0)));
    }
  }
  const auto shard = dir + "/sft_train.bin";
  write_file(shard, llmc_shard(tokens));
  std::string header;
  for (const int32_t v : {20261124, 1, static_cast<int32_t>(tokens.size())}) append_i32(header, v);
  header.resize(1024, '\0');
  write_file(dir + "/sft_train.mask", header + mask);
  return shard;
}

// The data flags of the instruction shard at `shard`.
std::vector<std::string> shard_data(const std::string& shard) {
  return {"--dataset", "tokens:" + shard, "--vocab_size", "64"};
}

std::vector<std::string> sft_args(const std::vector<std::string>& data, const std::string& out,
                                  std::vector<std::string> extra) {
  std::vector<std::string> args{
      "train", "--model", "gpt", "--n_layer", "1",
      "--n_embd", "32", "--n_head", "2", "--block_size", "48",
      "--mixed_precision", "no", "--device", "cpu", "--lr", "1e-2", "--warmup_steps", "0",
      "--max_steps", "6", "--log_every", "1", "--loader_workers", "0", "--val_fraction", "0",
      "--seed", "5", "--packing=false", "--dist_timeout", "30", "--output_dir", out,
      // Adam divides by sqrt(v) + eps, so that where a gradient is nearly 0 its rounding noise,
      // which differs with the order of the sums, moves the weight by up to lr: the key bias's
      // exact gradient is 0 (softmax ignores what it adds to every score of a query), and with
      // the default 1e-8 its noise alone set splits 7e-4 of the largest change apart (and 1e-4
      // still 8e-6). eps 1e-3 damps the updates of gradients below it, the rest stay Adam's.
      "--adam_eps", "1e-3"};
  args.insert(args.end(), data.begin(), data.end());
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// Trains on `world` processes (1: a plain process) and returns the final checkpoint's path: a
// file, or ZeRO's directory of shards.
std::string train(const std::vector<std::string>& data, const std::string& out, int world,
                  const std::vector<std::string>& extra) {
  auto args = sft_args(data, out, extra);
  if (world == 1) {
    const auto run = run_ampt(args);
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
  } else {
    args.insert(args.begin(), AMPT_BINARY);
    const auto run = run_rank_processes(world, args, out + "-logs");
    for (size_t r = 0; r < run.status.size(); ++r) {
      INFO("rank " << r << " stdout:\n" << run.out[r] << "\nstderr:\n" << run.err[r]);
      REQUIRE(run.status[r] == 0);
    }
  }
  const auto path = out + "/ckpt-00000006";
  return std::filesystem::exists(path + ".pt") ? path + ".pt" : path;
}

std::map<std::string, torch::Tensor> weights(const std::string& checkpoint) {
  const auto loaded = ampt::checkpoint::load(checkpoint);
  return {loaded.model.begin(), loaded.model.end()};
}

double largest_difference(const std::map<std::string, torch::Tensor>& a,
                          const std::map<std::string, torch::Tensor>& b) {
  REQUIRE(a.size() == b.size());
  double largest = 0.0;
  for (const auto& [name, tensor] : a) {
    INFO(name);
    REQUIRE(b.count(name) == 1);
    largest = std::max(largest, (tensor - b.at(name)).abs().max().item<double>());
  }
  return largest;
}

struct Split {
  std::string name;
  int world;
  std::vector<std::string> flags;
};

// Every split's weights after six steps, and its losses, against batch 4's: within 1e-5 of the
// largest change any weight made. `data` writes the data into a directory and returns its flags
// (the instruction shard's by default).
void check_splits(const std::vector<std::string>& common, const std::vector<Split>& splits,
                  const std::function<std::vector<std::string>(const std::string&)>& data =
                      [](const std::string& dir) { return shard_data(write_instruction_shard(dir)); }) {
  const auto dir = make_temp_dir();
  const auto shard = data(dir);
  auto with = [&](std::vector<std::string> flags) {
    flags.insert(flags.end(), common.begin(), common.end());
    return flags;
  };
  // lr 1e-30 moves no weight by as much as an fp32 ulp: they stay where the seed put them.
  const auto start =
      weights(train(shard, dir + "/start", 1, with({"--batch_size", "4", "--lr", "1e-30"})));
  const auto whole_path = train(shard, dir + "/whole", 1, with({"--batch_size", "4"}));
  const auto whole = weights(whole_path);
  const double change = largest_difference(whole, start);
  REQUIRE(change > 1e-3);
  const auto whole_losses = step_losses(read_file(dir + "/whole/metrics.jsonl"));
  REQUIRE(whole_losses.size() == 6);
  for (const auto& split : splits) {
    INFO(split.name);
    const auto out = dir + "/" + std::to_string(&split - splits.data());
    const auto path = train(shard, out, split.world, with(split.flags));
    const double apart = largest_difference(weights(path), whole);
    INFO("largest difference " << apart << ", largest change " << change);
    CHECK(apart <= 1e-5 * change);
    const auto losses = step_losses(read_file(out + "/metrics.jsonl"));
    REQUIRE(losses.size() == whole_losses.size());
    for (size_t i = 0; i < losses.size(); ++i) CHECK(losses[i] == Approx(whole_losses[i]).epsilon(1e-5));
  }
}

}  // namespace

TEST_CASE("split invariance: batch 4, batch 1 x 4 accumulation and 2 ranks x 2 (ZeRO 0, 2, 3) "
          "make the same fp32 updates from instruction data",
          "[train][sft][dist][cli]") {
  check_splits({}, {{"batch 1 x accumulation 4", 1, {"--batch_size", "1", "--grad_accum_steps", "4"}},
                    {"2 ranks x batch 2", 2, {"--batch_size", "2"}},
                    {"2 ranks x batch 2, ZeRO-2", 2, {"--batch_size", "2", "--zero_stage", "2"}},
                    {"2 ranks x batch 2, ZeRO-3", 2, {"--batch_size", "2", "--zero_stage", "3"}}});
}

TEST_CASE("split invariance: LoRA's adapters make the same fp32 updates whatever the split",
          "[train][sft][lora][dist][cli]") {
  check_splits({"--lora_rank", "4", "--lora_targets", "c_attn,c_proj"},
               {{"batch 1 x accumulation 4", 1, {"--batch_size", "1", "--grad_accum_steps", "4"}},
                {"2 ranks x batch 2", 2, {"--batch_size", "2"}}});
}

TEST_CASE("split invariance: the val loss of a split does not depend on --eval_batch_size",
          "[train][sft][cli]") {
  const auto dir = make_temp_dir();
  const auto shard = shard_data(write_instruction_shard(dir));
  std::vector<double> val_losses;
  // 12 held-out examples in batches of 12, 5 (the last of 2) and 3.
  for (const std::string size : {"12", "5", "3"}) {
    const auto out = dir + "/eval" + size;
    train(shard, out, 1,
          {"--batch_size", "4", "--val_fraction", "0.5", "--eval_batches", "0",
           "--eval_batch_size", size, "--max_steps", "1"});
    const auto metrics = read_file(out + "/metrics.jsonl");
    const auto evals = lines_with(metrics, "\"val_loss\"");
    REQUIRE(evals.size() == 1);
    val_losses.push_back(json_field(evals.front(), "val_loss"));
    CHECK(json_field(evals.front(), "val_batches") == (size == "12" ? 1 : size == "5" ? 3 : 4));
  }
  CHECK(val_losses[1] == Approx(val_losses[0]).epsilon(1e-6));
  CHECK(val_losses[2] == Approx(val_losses[0]).epsilon(1e-6));
}

// Global batches of 4 windows throughout: the packed epoch need not be a whole number of batches
// of 1, whose epochs would then end elsewhere than those of batch 4.
TEST_CASE("split invariance: packed examples under ZeRO-3 with activation checkpointing, and LoRA's "
          "adapters, make the same fp32 updates as batch 4",
          "[train][sft][packing][dist][cli]") {
  check_splits({"--packing=true"},
               {{"2 ranks x batch 2, ZeRO-3, activation checkpointing", 2,
                 {"--batch_size", "2", "--zero_stage", "3", "--grad_ckpt"}}});
  check_splits({"--packing=true", "--lora_rank", "4", "--lora_targets", "c_attn,c_proj"},
               {{"2 ranks x batch 2, activation checkpointing", 2,
                 {"--batch_size", "2", "--grad_ckpt"}}});
}

// A sparse model's routing is per token, so its cross-entropy splits as a dense model's does.
// The load-balancing loss does not: it is a product of one forward's own means (transformers
// computes it per forward too), so these runs leave it out; the next case keeps it on.
// Expert parallelism sends each (token, expert) row to the rank holding the expert and back: its
// ranks, 2 dividing the 8 experts, or 4 as 2 replicas of such a pair, make the same updates too,
// also with ZeRO sharding the dense parameters beside them.
TEST_CASE("split invariance: a sparse model (qwen3-moe, no aux loss) under batch 1 x 4, 2 ranks x 2 "
          "with ZeRO-3 and activation checkpointing, and expert parallelism with ZeRO on 2 and 4 "
          "ranks makes batch 4's fp32 updates",
          "[train][sft][moe][dist][cli]") {
  check_splits({"--model", "qwen3-moe", "--router_aux_loss_coef", "0"},
               {{"batch 1 x accumulation 4", 1, {"--batch_size", "1", "--grad_accum_steps", "4"}},
                {"2 ranks x batch 2, ZeRO-3, activation checkpointing", 2,
                 {"--batch_size", "2", "--zero_stage", "3", "--grad_ckpt"}},
                {"2 ranks x batch 2, expert parallel 2, ZeRO-3, activation checkpointing", 2,
                 {"--batch_size", "2", "--expert_parallel", "2", "--zero_stage", "3", "--grad_ckpt"}},
                {"4 ranks x batch 1, expert parallel 2 (2 replicas)", 4,
                 {"--batch_size", "1", "--expert_parallel", "2"}},
                {"4 ranks x batch 1, expert parallel 2 (2 replicas), ZeRO-2", 4,
                 {"--batch_size", "1", "--expert_parallel", "2", "--zero_stage", "2"}}});
}

// Its checkpoints hold whole experts: saved at step 3 by 2 ranks that divide them, the run
// resumed by one process (batch 4, the same global batch) ends where batch 4 throughout does. So
// does ZeRO's sharded checkpoint, whose common file holds the whole experts, resumed by one
// process and by 4 ranks with another stage, whose 2 replicas share the experts' moments.
TEST_CASE("expert parallelism: a checkpoint of 2 ranks that divide the experts, with or without "
          "ZeRO, resumes in one process or another layout and ends as one process's run",
          "[train][moe][dist][cli][checkpoint]") {
  const auto dir = make_temp_dir();
  const auto shard = shard_data(write_instruction_shard(dir));
  const std::vector<std::string> common{"--model", "qwen3-moe", "--router_aux_loss_coef", "0"};
  auto with = [&](std::vector<std::string> flags) {
    flags.insert(flags.end(), common.begin(), common.end());
    return flags;
  };
  const auto whole = weights(train(shard, dir + "/whole", 1, with({"--batch_size", "4"})));
  train(shard, dir + "/divided", 2,
        with({"--batch_size", "2", "--expert_parallel", "2", "--save_every", "3",
              "--keep_checkpoints", "2"}));
  const auto saved = ampt::checkpoint::load(dir + "/divided/ckpt-00000003.pt");
  REQUIRE(saved.world_size == 2);
  const auto resumed = run_ampt(sft_args(
      shard, dir + "/resumed",
      with({"--batch_size", "4", "--resume", dir + "/divided/ckpt-00000003.pt"})));
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.out, Catch::Contains("Resumed from") && Catch::Contains("at step 3"));
  train(shard, dir + "/sharded", 2,
        with({"--batch_size", "2", "--expert_parallel", "2", "--zero_stage", "3", "--save_every",
              "3", "--keep_checkpoints", "2"}));
  const auto sharded = dir + "/sharded/ckpt-00000003";
  REQUIRE(std::filesystem::is_directory(sharded));
  const auto from_sharded = run_ampt(sft_args(
      shard, dir + "/from-sharded", with({"--batch_size", "4", "--resume", sharded})));
  INFO(from_sharded.out << from_sharded.err);
  REQUIRE(from_sharded.exit_code == 0);
  // 4 ranks: 2 replicas of the pair, which share the experts' optimizer state under ZeRO.
  const auto resharded = train(shard, dir + "/resharded", 4,
                               with({"--batch_size", "1", "--expert_parallel", "2",
                                     "--zero_stage", "1", "--resume", sharded, "--save_every", "4",
                                     "--keep_checkpoints", "2"}));
  // Their checkpoint at step 4 holds the moments both replicas stepped, gathered whole.
  const auto from_shared = run_ampt(sft_args(
      shard, dir + "/from-shared",
      with({"--batch_size", "4", "--resume", dir + "/resharded/ckpt-00000004"})));
  INFO(from_shared.out << from_shared.err);
  REQUIRE(from_shared.exit_code == 0);
  const auto start = weights(train(shard, dir + "/start", 1, with({"--batch_size", "4", "--lr", "1e-30"})));
  const double change = largest_difference(whole, start);
  for (const auto& [name, path] :
       {std::pair{"expert parallel 2, resumed in one process", dir + "/resumed/ckpt-00000006.pt"},
        std::pair{"expert parallel 2 with ZeRO-3, resumed in one process",
                  dir + "/from-sharded/ckpt-00000006.pt"},
        std::pair{"expert parallel 2 with ZeRO-3, resumed by 4 ranks (2 replicas) with ZeRO-1",
                  resharded},
        std::pair{"those 4 ranks' step 4, resumed in one process",
                  dir + "/from-shared/ckpt-00000006.pt"}}) {
    const double apart = largest_difference(weights(path), whole);
    INFO(name << ": largest difference " << apart << ", largest change " << change);
    CHECK(apart <= 1e-5 * change);
  }
}

// ZeRO-3 gathers a block's weights when the gradient of its output arrives; the router's logits
// also take a gradient from the aux loss and the z-loss, computed after every block. Both reach
// the router's GEMM only together with the block's own, once its weights are back. Expert
// parallelism changes where the experts run, not the per-rank aux loss plain ranks compute.
TEST_CASE("zero3 and expert parallelism: a sparse model with its aux loss and z-loss makes plain "
          "data parallel's updates",
          "[train][moe][zero][dist][cli]") {
  const auto dir = make_temp_dir();
  const auto shard = shard_data(write_instruction_shard(dir));
  // Clipped: the norm is the whole model's, experts' slices included, on every rank.
  const std::vector<std::string> common{"--model", "qwen3-moe", "--router_aux_loss_coef", "0.5",
                                        "--router_z_loss_coef", "0.01", "--batch_size", "2",
                                        "--max_grad_norm", "0.5"};
  auto with = [&](std::vector<std::string> flags) {
    flags.insert(flags.begin(), common.begin(), common.end());
    return flags;
  };
  const auto start = weights(train(shard, dir + "/start", 2, with({"--lr", "1e-30"})));
  const auto plain = weights(train(shard, dir + "/plain", 2, with({})));
  const auto sharded = weights(train(shard, dir + "/zero3", 2, with({"--zero_stage", "3", "--grad_ckpt"})));
  const auto divided = weights(train(shard, dir + "/experts", 2, with({"--expert_parallel", "2"})));
  const double change = largest_difference(plain, start);
  REQUIRE(change > 1e-3);
  for (const auto& [name, run] : {std::pair{"zero3", &sharded}, std::pair{"expert parallel 2", &divided}}) {
    const double apart = largest_difference(*run, plain);
    INFO(name << ": largest difference " << apart << ", largest change " << change);
    CHECK(apart <= 1e-5 * change);
  }
  const auto plain_metrics = read_file(dir + "/plain/metrics.jsonl");
  const auto zero3_metrics = read_file(dir + "/zero3/metrics.jsonl");
  const auto plain_losses = step_losses(plain_metrics), zero3_losses = step_losses(zero3_metrics);
  REQUIRE(plain_losses.size() == 6);
  REQUIRE(zero3_losses.size() == 6);
  for (size_t i = 0; i < 6; ++i) CHECK(zero3_losses[i] == Approx(plain_losses[i]).epsilon(1e-6));
  const auto logged = lines_with(zero3_metrics, "\"z_loss\"");
  CHECK(logged.size() == 6);
}

// A preference objective's loss is the mean over the step's pairs: 24 pairs whose answers run
// from 1 to 30 words, packed into windows that hold 1 to several pairs each, so that a mean per
// micro-batch would weigh a window's pairs by how many share it. beta 0.02 keeps DPO's loss away
// from 0, where its fp32 rounding would be most of it.
TEST_CASE("split invariance: dpo's batch 4, batch 1 x 4 accumulation and 2 ranks x 2 (ZeRO 0, 2, 3) "
          "make the same fp32 updates from preference pairs",
          "[train][preference][dist][cli]") {
  const std::string ranks = AMPT_SOURCE_DIR "/.deps/gpt2.tiktoken";
  if (!std::filesystem::exists(ranks)) {
    AMPT_SKIP(reference, "skipping: .deps/gpt2.tiktoken (scripts/bootstrap.sh) missing");
  }
  const auto pairs = [&](const std::string& dir) {
    std::string records;
    for (int i = 0; i < 24; ++i) {
      std::string chosen;
      std::string rejected;
      for (int w = 0; w < 1 + (i * 7) % 30; ++w) chosen += fmt::format(" yes{}", w % 5);
      for (int w = 0; w < 1 + (i * 11) % 30; ++w) rejected += fmt::format(" no{}", w % 3);
      records += fmt::format(R"({{"prompt": "Question {}?", "chosen": "{}", "rejected": "{}"}})"
                             "\n",
                             i, chosen, rejected);
    }
    write_file(dir + "/prefs.jsonl", records);
    return std::vector<std::string>{"--dataset", "jsonl:" + dir + "/prefs.jsonl", "--tokenizer",
                                    ranks, "--vocab_size", "50257", "--objective", "dpo",
                                    "--beta", "0.02"};
  };
  check_splits({}, {{"batch 1 x accumulation 4", 1, {"--batch_size", "1", "--grad_accum_steps", "4"}},
                    {"2 ranks x batch 2", 2, {"--batch_size", "2"}},
                    {"2 ranks x batch 2, ZeRO-2", 2, {"--batch_size", "2", "--zero_stage", "2"}}},
               pairs);
  // ZeRO-3 keeps no whole copy of the model: the reference's log-probabilities are precomputed.
  check_splits({"--precompute_ref_logps"},
               {{"2 ranks x batch 2, ZeRO-3", 2, {"--batch_size", "2", "--zero_stage", "3"}}}, pairs);
}
