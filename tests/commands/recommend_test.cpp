// `ampt recommend` as a process: the table, the recommendation and usage errors.
#include "support/process.h"

#include <catch2/catch.hpp>

#include <sstream>
#include <string>

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
  CHECK(r.err == "ampt: error: invalid value '-1' for gpu_memory_gb (flag --gpu_memory_gb): expected a number > 0\n");
  r = ampt::test::run_ampt({"recommend", "--model", "cnn", "--input_shape", "3,a"});
  CHECK(r.exit_code == 2);
  CHECK(r.err == "ampt: error: invalid value '3,a' for input_shape (flag --input_shape): expected "
                 "positive integers like 784 or 3,32,32\n");
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

// qwen3-30b-a3b on 8 ranks with --expert_parallel 8: each holds 16 of the 128 experts of each
// of its 48 sparse blocks, 48 · 16 · 3 · 2048 · 768 = 3,623,878,656 expert weights, beside the
// 1,541,093,376 others (30,532,122,624 − 48 · 128 · 3 · 2048 · 768), 5,164,972,032 in all:
// 19.24 GiB in fp32. The all-reduce buckets copy the others' gradients only: 19.24 + 5.74.
TEST_CASE("cli recommend: expert parallelism plans one rank's share of the experts",
          "[recommend][cli][moe]") {
  auto r = ampt::test::run_ampt({"recommend", "--model", "qwen3-30b-a3b", "--world_size", "8",
                                 "--expert_parallel", "8", "--batch_size", "1", "--block_size",
                                 "2048"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("Model qwen3-30b-a3b: 30,532,122,624 parameters"));
  CHECK_THAT(r.out, Catch::Contains("16 experts per rank under expert parallel 8: 5164972032 "
                                    "parameters per rank"));
  CHECK_THAT(r.out, Catch::Contains("Data parallel: 8 ranks, expert parallel 8"));
  CHECK_THAT(r.out, Catch::Contains("| fp32/O0 | 19.24 | 24.98 | 0.00 | 38.48 |"));

  r = ampt::test::run_ampt({"recommend", "--model", "qwen3-30b-a3b", "--world_size", "6",
                            "--expert_parallel", "4"});
  CHECK(r.exit_code == 2);
  CHECK(r.err == "ampt: error: expert_parallel 4 does not divide the world size 6: each group of "
                 "4 consecutive ranks divides the experts; use a divisor of 6\n");
  // ZeRO-2 beside it shards the others only: fp32 master and gradient shards of 1,541,093,376 / 8
  // = 192,636,672 (0.72 GiB each); the experts keep their whole fp32 gradients (13.50 GiB) and
  // both AdamW moments (27.00 GiB) beside 1/8 of the others' (1.44 GiB). O2 is not offered:
  // O1 fits a 141 GiB GPU, and the reason says why O1.
  r = ampt::test::run_ampt({"recommend", "--model", "qwen3-30b-a3b", "--world_size", "8",
                            "--expert_parallel", "8", "--zero_stage", "2", "--batch_size", "1",
                            "--block_size", "2048", "--gpu_memory_gb", "141"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("Data parallel: 8 ranks, expert parallel 8 (each rank holds "
                                    "1/8 of every sparse layer's experts whole, with their "
                                    "gradients and optimizer state), ZeRO stage 2 over the other "
                                    "parameters"));
  CHECK_THAT(r.out, Catch::Contains("| fp32/O0 | 19.24 | 14.22 | 0.72 | 28.44 |"));
  CHECK_THAT(r.out, !Catch::Contains("/O2 |"));
  CHECK_THAT(r.out, Catch::Contains("O1: O2 does not run beside ZeRO and expert parallelism"));
  // ZeRO-3's fewest ranks start from the expert groups' size.
  r = ampt::test::run_ampt({"recommend", "--model", "qwen3-30b-a3b", "--world_size", "16",
                            "--expert_parallel", "16", "--zero_stage", "3", "--batch_size", "1",
                            "--block_size", "2048", "--grad_ckpt"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("ZeRO-3 (bf16/O1, micro-batch 1, activation checkpointing, "
                                    "expert parallel 16): fits the 71.0 GiB usable of the 80 GiB "
                                    "GPU on 16 ranks, the fewest its expert groups allow"));
}

// recommend refuses what train would: dropout on an adapter over expert weights.
TEST_CASE("cli recommend: dropout on expert adapters is refused as train refuses it",
          "[recommend][cli][moe][lora]") {
  const auto r = ampt::test::run_ampt({"recommend", "--model", "qwen3-30b-a3b", "--lora_rank", "16",
                                       "--lora_target_parameters", "mlp.experts.down_proj",
                                       "--lora_dropout", "0.05"});
  CHECK(r.exit_code == 2);
  CHECK(r.err == "ampt: error: lora_dropout 0.05 with lora_targets naming the expert weight "
                 "layers.0.mlp.experts.down_proj: an expert group's adapter is added to its "
                 "weights, where no input dropout can go (peft refuses it too); use lora_dropout 0 "
                 "or leave the experts out\n");
}

TEST_CASE("cli recommend: ZeRO stage 3 per rank, and the fewest ranks that fit",
          "[recommend][cli][zero]") {
  auto r = ampt::test::run_ampt(
      {"recommend", "--model", "llama-3.1-8b", "--world_size", "8", "--zero_stage", "3"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains(
                        "Data parallel: 8 ranks, ZeRO stage 3 (parameters, gradients, optimizer "
                        "state and fp32 masters sharded; two blocks gathered at a time); "
                        "activations are whole on every rank, weights and gradients only the "
                        "root's (embeddings, final norm, head) and two blocks'.\n"));
  CHECK_THAT(r.out, Catch::Contains("Estimated peak memory in GiB per rank at micro-batch 128"));
  // Per parameter (P = 8,030,261,248), bf16/O1: the fp32 root (embed_tokens, lm_head, norm:
  // 1,050,677,248) and two bf16 blocks (436,240,384 bytes each) are 5,075,189,760 bytes of
  // weights, 0.63 per parameter, and as many of gradients beside the fp32 shard's 4/8; the
  // masters' 4/8 and AdamW's 8/8. O2: the root in bf16 but the norm, 2,973,843,456 bytes.
  CHECK_THAT(r.out, Catch::Contains("- bf16/O1: 0.63 + 1.13 + 0.50 + 1.00 = 3.26 (one process: 16.00)"));
  CHECK_THAT(r.out, Catch::Contains("- bf16/O2: 0.37 + 0.87 + 0.50 + 1.00 = 2.74 (one process: 16.00)"));
  // 128 samples of 2048 tokens: the activations alone exceed the GPU on any number of ranks.
  CHECK_THAT(r.out, Catch::Contains("\nZeRO-3 (bf16/O1, micro-batch 128): does not fit the 80 GiB "
                                    "GPU on any number of ranks up to 1024: the activations, the "
                                    "root and two gathered blocks"));
  // Not with --grad_ckpt either (each block's fp32 input alone, 32 · 128 · 2048 · 4096 · 4
  // bytes, is 128 GiB): a smaller micro-batch is what helps.
  CHECK_THAT(r.out, !Catch::Contains("with --grad_ckpt from"));
  CHECK_THAT(r.out, Catch::Contains("a smaller --batch_size lowers the activations\n"));
  CHECK_THAT(r.out, Catch::Contains("- O1: under ZeRO-3 the blocks are gathered in bf16"));
  CHECK_THAT(r.out, Catch::Contains("--zero_stage 3 --mixed_precision bf16"));

  // One sample with activation checkpointing: from 4 ranks (memory_plan_test has the sums).
  r = ampt::test::run_ampt({"recommend", "--model", "llama-3.1-8b", "--world_size", "8",
                            "--zero_stage", "3", "--batch_size", "1", "--grad_ckpt"});
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains(
                        "\nZeRO-3 (bf16/O1, micro-batch 1, activation checkpointing): fits the "
                        "71.0 GiB usable of the 80 GiB GPU from 4 ranks (per rank 46.0 GiB on 4; "
                        "75.9 GiB on 2)\n"));

  // The recommended command names --grad_ckpt once, at its end, though the user gave it too.
  r = ampt::test::run_ampt({"recommend", "--gpu_memory_gb", "24", "--model", "qwen3-30b-a3b",
                            "--lora_rank", "16", "--base_dtype", "nf4", "--grad_ckpt",
                            "--batch_size", "1", "--block_size", "2048"});
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("  ampt train --model qwen3-30b-a3b --lora_rank 16 --base_dtype "
                                    "nf4 --block_size 2048 --mixed_precision bf16 --amp_opt_level "
                                    "O1 --batch_size 1 --grad_accum_steps 1 --grad_ckpt\n"));

  // gpt2-1558m at 128 samples of 1024 tokens: its activations exceed the GPU without
  // checkpointing (the blocks' saved tensors alone, 28 bytes per token and channel in each of 48
  // blocks, 48 · 128 · 1024 · 1600 · 28 bytes, are 262.5 GiB), and the line names --grad_ckpt
  // instead of a smaller batch.
  r = ampt::test::run_ampt(
      {"recommend", "--model", "gpt2-1558m", "--world_size", "8", "--zero_stage", "3"});
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("ZeRO-3 (bf16/O1, micro-batch 128): does not fit the 80 GiB "
                                    "GPU on any number of ranks up to 1024"));
  CHECK_THAT(r.out, Catch::Contains("; with --grad_ckpt from "));
  CHECK_THAT(r.out, !Catch::Contains("a smaller --batch_size"));

  // A model that fits one GPU says so; stages below 3 print no such line.
  r = ampt::test::run_ampt({"recommend", "--model", "gpt2-124m", "--batch_size", "8",
                            "--zero_stage", "3"});
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("ZeRO-3 (bf16/O1, micro-batch 8): fits one 80 GiB GPU without "
                                    "sharding"));
  r = ampt::test::run_ampt({"recommend", "--model", "gpt2-124m", "--world_size", "4",
                            "--zero_stage", "2"});
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, !Catch::Contains("ZeRO-3 ("));
}

namespace {

// The `total` column of a scheme's row ("| bf16/O1 | weights | ... | total | ...") in GiB.
double row_total(const std::string& out, const std::string& scheme) {
  const auto start = out.find("| " + scheme + " |");
  REQUIRE(start != std::string::npos);
  std::stringstream row(out.substr(start, out.find('\n', start) - start));
  std::string cell;
  for (int i = 0; i < 9; ++i) std::getline(row, cell, '|');
  return std::stod(cell);
}

}  // namespace

TEST_CASE("cli recommend: LoRA's frozen base and adapters", "[recommend][cli][lora]") {
  for (const std::string model : {"gpt2-1558m", "llama-3.1-8b"}) {
    INFO(model);
    const auto full = ampt::test::run_ampt({"recommend", "--model", model, "--batch_size", "4"});
    const auto lora = ampt::test::run_ampt(
        {"recommend", "--model", model, "--batch_size", "4", "--lora_rank", "16"});
    INFO(lora.out << lora.err);
    REQUIRE(full.exit_code == 0);
    REQUIRE(lora.exit_code == 0);
    for (const auto* scheme : {"fp32/O0", "bf16/O1", "bf16/O2", "fp16/O1", "fp8/O1"}) {
      INFO(scheme);
      CHECK(row_total(lora.out, scheme) < row_total(full.out, scheme));
    }
    // The recommended command keeps the adapters.
    CHECK_THAT(lora.out, Catch::Contains("--lora_rank 16 --mixed_precision bf16"));
  }
  // gpt2-1558m: 48 blocks, c_attn [4800, 1600]: 48 x 16 x (1600 + 4800) adapter parameters.
  const auto gpt = ampt::test::run_ampt({"recommend", "--model", "gpt2-1558m", "--lora_rank", "16"});
  CHECK_THAT(gpt.out, Catch::Contains("LoRA rank 16 on 48 Linear layers (c_attn): 4,915,200 "
                                      "trainable parameters (0.31%)"));
  // llama-3.1-8b: 32 blocks, q_proj [4096, 4096] and v_proj [1024, 4096].
  const auto llama =
      ampt::test::run_ampt({"recommend", "--model", "llama-3.1-8b", "--lora_rank", "16"});
  CHECK_THAT(llama.out, Catch::Contains("LoRA rank 16 on 64 Linear layers (q_proj,v_proj): "
                                        "6,815,744 trainable parameters"));

  const auto bad = ampt::test::run_ampt(
      {"recommend", "--model", "gpt2-1558m", "--lora_rank", "16", "--lora_targets", "c_attn,qkv"});
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::StartsWith("ampt: error: lora_targets 'qkv' matches no Linear layer "
                                        "of the model"));
  const auto cnn = ampt::test::run_ampt({"recommend", "--model", "cnn", "--lora_rank", "8"});
  CHECK(cnn.exit_code == 2);
  CHECK(cnn.err == "ampt: error: lora_rank 8 with model 'cnn': LoRA adapts the Linear layers of "
                   "a transformer (gpt, llama, qwen2, qwen3, mistral and their presets); use lora_rank 0\n");
}
