// Fine-tuning on text as a user runs it: README.md byte by byte, JSON Lines one example per
// record, two short texts through GPT-2's tokenizer; small splits train and evaluate.
#include "support/json_field.h"
#include "support/process.h"
#include "text/text_fixtures.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>

using ampt::test::json_field;
using ampt::test::lines_with;
using ampt::test::make_temp_dir;
using ampt::test::read_file;
using ampt::test::run_ampt;
using ampt::test::write_file;

TEST_CASE("cli train: gpt-tiny on text:README.md, its validation split smaller than a batch",
          "[cli][text]") {
  const auto dir = make_temp_dir();
  // As a user types it in the repository: the defaults, batch_size 128 among them.
  const auto r = run_ampt({"train", "--model", "gpt-tiny", "--dataset", "text:README.md",
                           "--device", "cpu", "--output_dir", dir},
                          {}, AMPT_SOURCE_DIR);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("[AMP] Data: text:README.md: 1 file, ") &&
                        Catch::Contains(" bytes as tokens; train "));
  // The held-out tenth is fewer than 128 windows: one batch of all of them.
  const auto evals = lines_with(r.out, "eval step ");
  REQUIRE(evals.size() == 1);
  CHECK_THAT(evals.front(), Catch::EndsWith("(1 batches)"));
  const auto summary = read_file(dir + "/summary.json");
  CHECK(json_field(summary, "final_val_loss") < json_field(summary, "initial_loss"));
}

TEST_CASE("cli train: jsonl with --text_field and --packing=false, a train split below a batch",
          "[cli][text]") {
  const auto dir = make_temp_dir();
  std::string records;
  for (int i = 0; i < 40; ++i) {
    records += "{\"id\": " + std::to_string(i) + ", \"content\": \"record " + std::to_string(i) +
               (i % 2 == 0 ? " is even" : " is odd, and a little longer than the even ones") +
               "\"}\n";
  }
  write_file(dir + "/data.jsonl", records);
  const auto r = run_ampt({"train", "--model", "gpt-tiny", "--dataset", "jsonl:" + dir + "/data.jsonl",
                           "--text_field", "content", "--packing=false", "--max_length", "32",
                           "--device", "cpu", "--output_dir", dir + "/run", "--max_steps", "30",
                           "--log_every", "10"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains(": 40 documents, ") &&
                        Catch::Contains("one example per document, 20 truncated to 33 tokens; "
                                        "train 36 / val 4 examples of up to 32 tokens, padded"));
  CHECK_THAT(r.err, Catch::Contains("ampt: warning: the training split of jsonl:" + dir +
                                    "/data.jsonl has 36 samples, fewer than one batch of 128: "
                                    "training with batch size 36\n"));
  CHECK_THAT(r.out, Catch::Contains("[AMP] Batch 36 x 1 accumulation = 36 samples/step"));
  const auto summary = read_file(dir + "/run/summary.json");
  CHECK(json_field(summary, "final_loss") < json_field(summary, "initial_loss"));
  CHECK(json_field(summary, "final_val_loss") > 0.0);
}

TEST_CASE("cli train: two short texts through GPT-2's tokenizer fine-tune a tiny GPT, cached",
          "[cli][text]") {
  if (!ampt::test::have_gpt2_ranks()) {
    WARN("skipping: " << ampt::test::gpt2_ranks_path() << " not fetched (run scripts/bootstrap.sh)");
    return;
  }
  const auto dir = make_temp_dir();
  write_file(dir + "/texts/one.txt",
             "The quick brown fox jumps over the lazy dog. It was a bright cold day in April, "
             "and the clocks were striking thirteen.\n");
  write_file(dir + "/texts/two.txt",
             "Call me Ishmael. Some years ago, never mind how long precisely, having little or "
             "no money in my purse, I thought I would sail about a little.\n");
  const std::vector<std::string> args = {
      "train", "--model", "gpt", "--n_layer", "2", "--n_embd", "64", "--n_head", "4",
      "--block_size", "16", "--vocab_size", "50304", "--tokenizer", ampt::test::gpt2_ranks_path(),
      "--dataset", "text:" + dir + "/texts", "--device", "cpu", "--output_dir", dir + "/run",
      "--max_steps", "40", "--log_every", "10", "--lr", "1e-2", "--warmup_steps", "5"};
  const auto r = run_ampt(args);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("[AMP] Data: text:" + dir + "/texts: 2 documents, ") &&
                        Catch::Contains(" tokens (GPT-2 BPE from " + ampt::test::gpt2_ranks_path() +
                                        "), tokenized in "));
  CHECK_THAT(r.err, Catch::Contains("ampt: warning: the training split of text:" + dir +
                                    "/texts has ") &&
                        Catch::Contains("fewer than one batch of 128: training with batch size "));
  const auto summary = read_file(dir + "/run/summary.json");
  CHECK(json_field(summary, "final_loss") < 0.5 * json_field(summary, "initial_loss"));

  // A second run tokenizes nothing: the shard in output_dir/token_cache is reused.
  auto again = args;
  again.insert(again.end(), {"--max_steps", "1"});
  const auto second = run_ampt(again);
  INFO(second.out << second.err);
  REQUIRE(second.exit_code == 0);
  CHECK_THAT(second.out, Catch::Contains("), reusing " + dir + "/run/token_cache/text-texts-"));
}

TEST_CASE("cli: the text data options reject bad values with one line", "[cli][text][errors]") {
  const auto dir = make_temp_dir();
  write_file(dir + "/a.txt", "some text");
  const auto error = [&](std::vector<std::string> args, int status, const std::string& line) {
    args.insert(args.begin(), {"train", "--model", "gpt-tiny", "--device", "cpu", "--output_dir",
                               dir + "/run", "--dataset", "text:" + dir + "/a.txt"});
    const auto r = run_ampt(args);
    INFO(r.out << r.err);
    CHECK(r.exit_code == status);
    CHECK_THAT(r.err, Catch::StartsWith("ampt: error: " + line));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  };
  error({"--text_field", ""}, 2,
        "invalid value '' for text_field (flag --text_field): expected a non-empty string");
  error({"--packing=maybe"}, 2,
        "invalid value 'maybe' for packing (flag --packing): expected a boolean (true/false, "
        "yes/no, on/off, 1/0)");
  error({"--max_length", "-1"}, 2,
        "invalid value '-1' for max_length (flag --max_length): expected an integer >= 0");
  error({"--max_length", "65"}, 2,
        "max_length 65 exceeds the model's block_size 64: lower --max_length or raise --block_size");
  error({"--tokenizer", dir + "/absent"}, 1, dir + "/absent: tokenizer not found");
  error({"--dataset", "jsonl:"}, 2,
        "invalid value 'jsonl:' for dataset (flag --dataset): expected one of synthetic, "
        "text:PATH, jsonl:PATH, tokens:PATH_OR_GLOB, mnist:DIR, fashion-mnist:DIR or cifar10:DIR");
  error({"--dataset", "jsonl:" + dir + "/a.txt"}, 1, dir + "/a.txt: line 1: invalid JSON: ");
}
