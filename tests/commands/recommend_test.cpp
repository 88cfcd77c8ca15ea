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
                                    "64 x 8 accumulation steps\n  ampt train --model gpt2-124m "
                                    "--mixed_precision bf16 --amp_opt_level O1 --batch_size 64 "
                                    "--grad_accum_steps 8\n"));

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
