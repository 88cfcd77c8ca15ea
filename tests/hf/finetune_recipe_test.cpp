// configs/finetune_gpt2.yaml as a user runs it: `gpt2` found offline in a Hugging Face cache
// (here a random GPT-2 that transformers made, with GPT-2's real tokenizer files), two short
// texts, the recipe's settings in the startup block, and perplexity before and after.
#include "support/gpt2_reference.h"
#include "support/process.h"
#include "support/skip.h"

#include <catch2/catch.hpp>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <string>

using ampt::test::make_temp_dir;
using ampt::test::run_ampt;

namespace {

// A hub cache holding `gpt2` as huggingface_hub lays it out.
std::string cache_with_gpt2() {
  const auto cache = make_temp_dir();
  const auto repo = cache + "/models--gpt2";
  const auto snapshot = repo + "/snapshots/0123abc";
  std::filesystem::create_directories(snapshot);
  std::filesystem::create_directories(repo + "/refs");
  ampt::test::write_file(repo + "/refs/main", "0123abc");
  ampt::test::make_pretrained_gpt2(snapshot, {"--n_embd", "32", "--n_positions", "512"});
  return cache;
}

// A hub cache holding meta-llama/Llama-3.2-1B: a tiny random Llama that transformers made, with
// llama3 rope and a tied head, and tokenizer files beside it.
std::string cache_with_llama() {
  const auto cache = make_temp_dir();
  const auto repo = cache + "/models--meta-llama--Llama-3.2-1B";
  const auto snapshot = repo + "/snapshots/4e20de3";
  std::filesystem::create_directories(repo + "/refs");
  ampt::test::write_file(repo + "/refs/main", "4e20de3");
  const auto r = ampt::test::run_process(
      {AMPT_PYTHON, AMPT_SOURCE_DIR "/tests/hf/llama_reference.py", "make", snapshot, "--hidden",
       "32", "--inter", "64", "--positions", "512", "--vocab", "50257", "--llama3", "--tied",
       "--tokenizer", ampt::test::kGpt2Ranks});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return cache;
}

// Two short texts, as a user's folder of .txt files.
std::string two_texts() {
  const auto dir = make_temp_dir();
  std::string first, second;
  for (int i = 0; i < 40; ++i) {
    first += "The quick brown fox " + std::to_string(i) + " jumps over the lazy dog. ";
    second += "A stitch in time saves nine, said the tailor on day " + std::to_string(i) + ".\n";
  }
  ampt::test::write_file(dir + "/first.txt", first);
  ampt::test::write_file(dir + "/second.txt", second);
  return dir;
}

}  // namespace

TEST_CASE("configs/finetune_gpt2.yaml fine-tunes gpt2 from the hub cache on two short texts",
          "[hf][gpt2][configs]") {
  if (!ampt::test::have_gpt2_references()) {
    AMPT_SKIP(reference, "skipping: transformers/tiktoken or .deps/gpt2.tiktoken (scripts/bootstrap.sh) missing");
  }
  const auto cache = cache_with_gpt2();
  const auto out = make_temp_dir();
  // Shorter windows than the recipe's 512 and two steps keep it quick on a CPU; everything
  // else is the file's.
  const auto r = run_ampt({"train", "--config", AMPT_SOURCE_DIR "/configs/finetune_gpt2.yaml",
                           "--dataset", "text:" + two_texts(), "--block_size", "64", "--max_steps",
                           "2", "--device", "cpu", "--output_dir", out},
                          {{"HF_HUB_CACHE", cache}});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("[AMP] Weights: pretrained, from " + cache +
                                    "/models--gpt2/snapshots/0123abc"));
  CHECK_THAT(r.out, Catch::Contains("(GPT-2 BPE from " + cache + "/models--gpt2/snapshots/0123abc/"));
  CHECK_THAT(r.out, Catch::Contains("[AMP] Using FP16 mixed precision"));
  CHECK_THAT(r.out, Catch::Contains("[AMP] GradScaler: on (init_scale=65536,"));
  CHECK_THAT(r.out, Catch::Contains("weight_decay=0.01 on matrices); lr 5e-05 → 0"));
  // The recipe's 8 accumulation steps do not fit two short texts' epoch: it accumulates what
  // there is.
  CHECK_THAT(r.err, Catch::Contains("fewer than grad_accum_steps 8: accumulating 1"));
  CHECK_THAT(r.out, Catch::Contains("Val Perplexity:"));
  const auto summary = YAML::LoadFile(out + "/summary.json");
  CHECK(summary["initial_scale"].as<double>() == 65536.0);
  CHECK(summary["initial_val_loss"].as<double>() > 0.0);
  CHECK(summary["final_val_loss"].as<double>() > 0.0);
}

TEST_CASE("configs/finetune_llama.yaml fine-tunes Llama-3.2-1B from the hub cache on two short texts",
          "[hf][llama][configs]") {
  if (!ampt::test::have_gpt2_references()) {
    AMPT_SKIP(reference, "skipping: transformers/tiktoken or .deps/gpt2.tiktoken (scripts/bootstrap.sh) missing");
  }
  const auto cache = cache_with_llama();
  const auto out = make_temp_dir();
  // Shorter windows and two steps keep it quick on a CPU (in fp32: a CPU without bf16
  // instructions emulates it slowly); everything else is the file's.
  const auto r = run_ampt({"train", "--config", AMPT_SOURCE_DIR "/configs/finetune_llama.yaml",
                           "--dataset", "text:" + two_texts(), "--block_size", "64", "--max_steps",
                           "2", "--mixed_precision", "no", "--device", "cpu", "--output_dir", out},
                          {{"HF_HUB_CACHE", cache}});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("[AMP] Model: llama (llama: n_layer 2, n_embd 32, n_head 4, "
                                    "n_kv_head 2, intermediate 64, block_size 512, vocab_size "
                                    "50257, rope_theta 500000 (llama3 scaling, factor 8), tied "
                                    "head, blocks recomputed in backward)"));
  CHECK_THAT(r.out, Catch::Contains("[AMP] Weights: pretrained, from " + cache +
                                    "/models--meta-llama--Llama-3.2-1B/snapshots/4e20de3"));
  CHECK_THAT(r.out, Catch::Contains("weight_decay=0.01 on matrices); lr 2e-05 → 2e-06 (warmup 30 steps, cosine)"));
  CHECK_THAT(r.out, Catch::Contains("Val Perplexity:"));
  const auto summary = YAML::LoadFile(out + "/summary.json");
  CHECK(summary["initial_val_loss"].as<double>() > 0.0);
  CHECK(summary["final_val_loss"].as<double>() > 0.0);
}
