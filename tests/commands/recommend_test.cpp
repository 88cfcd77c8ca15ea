// `ampt recommend` as a process: the table, the recommendation and usage errors.
#include "support/process.h"

#include <catch2/catch.hpp>

TEST_CASE("cli recommend: table, recommendation and usage errors", "[recommend][cli]") {
  auto r = ampt::test::run_ampt({"recommend", "--model", "gpt2-124m", "--global_batch", "512",
                                 "--batch_size", "16"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("Model gpt2-124m: 124,475,904 parameters"));
  CHECK_THAT(r.out, Catch::Contains("at micro-batch 16 (--batch_size)"));
  for (const auto* row : {"| fp32/O0 |", "| bf16/O1 |", "| bf16/O2 |", "| fp16/O1 |", "| fp16/O2 |",
                          "| fp8/O1 |"}) {
    CHECK_THAT(r.out, Catch::Contains(row));
  }
  CHECK_THAT(r.out, Catch::Contains("Recommendation for a global batch of 512: bf16 O1, micro-batch "
                                    "256 x 2 accumulation steps\n  ampt train --model gpt2-124m "
                                    "--mixed_precision bf16 --amp_opt_level O1 --batch_size 256 "
                                    "--grad_accum_steps 2\n"));

  // fp8 only where the GPU has it; otherwise one line says so.
  r = ampt::test::run_ampt({"recommend", "--model", "gpt2-124m", "--compute_capability", "8.0"});
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("| bf16/O1 |"));
  CHECK_THAT(r.out, !Catch::Contains("| fp8/O1 |"));
  CHECK_THAT(r.out, Catch::Contains("\nfp8/O1: not listed, compute capability 8.0 has no fp8 "
                                    "tensor cores (they start at 8.9: Ada, Hopper)\n"));

  r = ampt::test::run_ampt({"recommend", "--model", "mlp"});
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, !Catch::Contains("fp8/O1"));

  r = ampt::test::run_ampt({"recommend", "--gpu_memory_gb", "-1"});
  CHECK(r.exit_code == 2);
  CHECK(r.err == "ampt: error: invalid value '-1' for --gpu_memory_gb: expected a number > 0\n");
  r = ampt::test::run_ampt({"recommend", "--model", "cnn", "--input_shape", "3,a"});
  CHECK(r.exit_code == 2);
  CHECK(r.err == "ampt: error: invalid value '3,a' for --input_shape: expected positive integers "
                 "like 784 or 3,32,32\n");
  r = ampt::test::run_ampt({"recommend", "--model", "gpt-tiny", "--seq_len", "128"});
  CHECK(r.exit_code == 2);
  CHECK(r.err == "ampt: error: seq_len 128 exceeds block_size 64 of model gpt-tiny\n");
  r = ampt::test::run_ampt({"recommend", "--help"});
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("--gpu_memory_gb GB"));
}

TEST_CASE("cli recommend: per-rank memory with --world_size and --zero_stage", "[recommend][cli][zero]") {
  const auto run = [](const std::string& stage) {
    auto r = ampt::test::run_ampt({"recommend", "--model", "gpt2-124m", "--global_batch", "512",
                                   "--batch_size", "16", "--world_size", "4", "--zero_stage", stage});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return r.out;
  };
  const auto stage2 = run("2");
  CHECK_THAT(stage2, Catch::Contains("Data parallel: 4 ranks, ZeRO stage 2 (optimizer state, fp32 "
                                     "masters and gradients sharded)"));
  CHECK_THAT(stage2, Catch::Contains("Estimated peak memory in GiB per rank at micro-batch 16"));
  // bf16/O1 per parameter: fp32 weights 4, a quarter each of the fp32 gradient shard (4), the
  // fp32 master shard (4) and AdamW's moments (8): 4 + 1 + 1 + 2 = 8, against 16 in one process.
  CHECK_THAT(stage2, Catch::Contains("- bf16/O1: 4.00 + 1.00 + 1.00 + 2.00 = 8.00 (one process: 16.00)"));
  CHECK_THAT(stage2, Catch::Contains("- bf16/O2: 2.00 + 1.00 + 1.00 + 2.00 = 6.00 (one process: 16.00)"));
  // The global batch of 512 is 128 per rank.
  CHECK_THAT(stage2, Catch::Contains("Recommendation for a global batch of 512"));
  const auto stage1 = run("1");
  CHECK_THAT(stage1, Catch::Contains("- bf16/O1: 4.00 + 9.00 + 1.00 + 2.00 = 16.00 (one process: 16.00)"));
  const auto stage0 = run("0");
  CHECK_THAT(stage0, Catch::Contains("- bf16/O1: 4.00 + 8.00 + 0.00 + 8.00 = 20.00 (one process: 16.00)"));

  const auto bad = ampt::test::run_ampt({"recommend", "--world_size", "3", "--global_batch", "64"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err == "ampt: error: --global_batch 64 does not divide among --world_size 3 ranks\n");
}
