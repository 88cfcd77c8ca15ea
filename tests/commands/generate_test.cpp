// `ampt generate` as a process: greedy output equal to transformers' greedy generate on the same
// pretrained GPT-2, and the usage errors.
#include "support/gpt2_reference.h"
#include "support/process.h"
#include "support/skip.h"

#include <catch2/catch.hpp>

#include <filesystem>

using ampt::test::kGpt2Ranks;
using ampt::test::kGpt2Reference;
using ampt::test::make_temp_dir;
using ampt::test::run_ampt;
using ampt::test::run_process;

namespace {

// A random GPT-2 with the real vocabulary and GPT-2's tokenizer files, made by transformers; empty
// when the references are missing (the test then says so).
std::string pretrained_with_tokenizer() {
  if (!ampt::test::have_gpt2_references()) return "";
  const auto dir = make_temp_dir();
  ampt::test::make_pretrained_gpt2(dir, {"--n_embd", "48"});
  return dir;
}

}  // namespace

TEST_CASE("generate: greedy tokens equal transformers' greedy generate", "[commands][generate]") {
  const auto dir = pretrained_with_tokenizer();
  if (dir.empty()) {
    AMPT_SKIP(reference, "skipping: transformers/tiktoken or .deps/gpt2.tiktoken (scripts/bootstrap.sh) missing");
  }
  for (const std::string prompt : {"Hello, my name is", "The café — naïve 日本語 text:"}) {
    INFO(prompt);
    const auto reference = run_process({AMPT_PYTHON, kGpt2Reference, "generate", dir, prompt, "16"});
    REQUIRE(reference.exit_code == 0);
    // In fp32, as transformers computes: generation takes the run's precision, and auto picks bf16
    // on a CPU that has it natively.
    const auto r = run_ampt({"generate", "--init_from", dir, "--prompt", prompt, "--temperature",
                             "0", "--max_new_tokens", "16", "--device", "cpu", "--mixed_precision",
                             "no"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out == reference.out);
  }
  // Sampling: the seed decides, and it samples. A random GPT-2's next-token distribution is
  // nearly flat, so that two seeds' 20 draws among the top 50, or one seed's and the greedy
  // continuation, agree by chance about never; top_k 1 leaves the greedy token alone. In fp32:
  // bf16 logits of a near-flat distribution tie, and top_k keeps every token tied with the k-th
  // (as transformers' TopKLogitsWarper does), so top_k 1 may then draw among them.
  const auto continued = [&](std::vector<std::string> flags) {
    std::vector<std::string> args = {"generate", "--init_from", dir, "--prompt", "Once",
                                     "--max_new_tokens", "20", "--device", "cpu",
                                     "--mixed_precision", "no"};
    args.insert(args.end(), flags.begin(), flags.end());
    const auto r = run_ampt(args);
    INFO(r.err);
    CHECK(r.exit_code == 0);
    return r.out;
  };
  const auto seed3 = continued({"--seed", "3"});
  CHECK(continued({"--seed", "3"}) == seed3);
  const auto greedy = continued({"--temperature", "0"});
  CHECK(seed3 != greedy);
  CHECK(continued({"--seed", "4"}) != seed3);
  CHECK(continued({"--seed", "3", "--top_k", "1"}) == greedy);
}

TEST_CASE("generate: what it needs and what it refuses, in one line each", "[commands][generate]") {
  auto r = run_ampt({"generate", "--init_from", "x"});
  CHECK(r.exit_code == 2);
  CHECK(r.err == "ampt: error: ampt generate needs --prompt; see ampt generate --help\n");
  r = run_ampt({"generate", "--prompt", "hi"});
  CHECK(r.exit_code == 2);
  CHECK(r.err == "ampt: error: ampt generate needs a model: --checkpoint PATH or --init_from "
                 "DIR|NAME\n");
  r = run_ampt({"generate", "--prompt", "hi", "--init_from", "x", "--top_p", "0"});
  CHECK(r.exit_code == 2);
  CHECK(r.err == "ampt: error: invalid value '0' for top_p (flag --top_p): expected a number in (0, 1]\n");
  r = run_ampt({"generate", "--prompt", "hi", "--init_from", "x", "--temperature", "-1"});
  CHECK(r.err == "ampt: error: invalid value '-1' for temperature (flag --temperature): expected a number >= 0\n");
  r = run_ampt({"generate", "--prompt", "hi", "--init_from", make_temp_dir() + "/none"},
               {{"HF_HUB_CACHE", make_temp_dir()}});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("is not a directory, and the Hugging Face cache"));
}

TEST_CASE("generate: a checkpoint's run's --tokenizer decodes, and a run without one is refused",
          "[commands][generate][text]") {
  if (!std::filesystem::exists(kGpt2Ranks)) {
    AMPT_SKIP(reference, "skipping: .deps/gpt2.tiktoken (scripts/bootstrap.sh) missing");
  }
  const auto dir = make_temp_dir();
  ampt::test::write_file(dir + "/a.txt", "Hello there, general reader. Hello there again.");
  const std::vector<std::string> small = {"train", "--model", "gpt", "--n_layer", "1", "--n_embd",
                                          "32", "--n_head", "2", "--block_size", "8",
                                          "--max_steps", "1", "--device", "cpu"};
  auto with_tokenizer = small;
  with_tokenizer.insert(with_tokenizer.end(),
                        {"--vocab_size", "50304", "--tokenizer", kGpt2Ranks, "--dataset",
                         "text:" + dir + "/a.txt", "--output_dir", dir + "/tok"});
  auto trained = run_ampt(with_tokenizer);
  INFO(trained.out << trained.err);
  REQUIRE(trained.exit_code == 0);
  const auto r = run_ampt({"generate", "--checkpoint", dir + "/tok/ckpt-00000001.pt", "--prompt",
                           "Hello", "--max_new_tokens", "3", "--temperature", "0"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::StartsWith("Hello"));

  auto synthetic = small;
  synthetic.insert(synthetic.end(), {"--output_dir", dir + "/synthetic"});
  trained = run_ampt(synthetic);
  REQUIRE(trained.exit_code == 0);
  const auto refused =
      run_ampt({"generate", "--checkpoint", dir + "/synthetic/ckpt-00000001.pt", "--prompt", "Hello"});
  CHECK(refused.exit_code == 2);
  CHECK(refused.err == "ampt: error: the run of " + dir +
                           "/synthetic/ckpt-00000001.pt named no tokenizer and did not start from a "
                           "pretrained GPT-2: give ampt generate the one it trained with "
                           "(--tokenizer PATH)\n");
}
