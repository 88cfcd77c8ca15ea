// Fine-tuning on text as a user runs it: README.md byte by byte, JSON Lines one example per
// record, two short texts through GPT-2's tokenizer, a pretrained GPT-2's own tokenizer with
// padded examples scored as transformers scores them; small splits train and evaluate.
#include "support/json_field.h"
#include "support/process.h"
#include "support/skip.h"
#include "support/python_modules.h"
#include "text/text_fixtures.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

using ampt::test::json_field;
using ampt::test::lines_with;
using ampt::test::make_temp_dir;
using ampt::test::read_file;
using ampt::test::run_ampt;
using ampt::test::write_file;

TEST_CASE("cli train: gpt-tiny on text:README.md, its validation split smaller than a batch",
          "[cli][text]") {
  const auto dir = make_temp_dir();
  // As a user types it in the repository: the defaults, batch_size 128 among them, but for a
  // held-out fiftieth, which stays below a batch of windows however README grows, and a dozen
  // steps rather than three epochs of a README that grows (two minutes where bf16 is emulated).
  const auto r = run_ampt({"train", "--model", "gpt-tiny", "--dataset", "text:README.md",
                           "--val_fraction", "0.02", "--device", "cpu", "--max_steps", "12",
                           "--output_dir", dir},
                          {}, AMPT_SOURCE_DIR);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("[AMP] Data: text:README.md: 1 file, ") &&
                        Catch::Contains(" bytes as tokens; train "));
  // The held-out fiftieth is fewer than 128 windows: one batch of all of them.
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
    AMPT_SKIP(reference, "skipping: " << ampt::test::gpt2_ranks_path() << " not fetched (run scripts/bootstrap.sh)");
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
        "text:PATH, jsonl:PATH, parquet:PATH, arrow:PATH, tokens:PATH_OR_GLOB, mnist:DIR, fashion-mnist:DIR or "
        "cifar10:DIR");
  error({"--dataset", "jsonl:" + dir + "/a.txt"}, 1, dir + "/a.txt: line 1: invalid JSON: ");
}

TEST_CASE("cli train: init_from's tokenizer, one padded example per document, losses as transformers'",
          "[cli][text][hf][python]") {
  if (!ampt::test::have_gpt2_ranks() ||
      !ampt::test::python_has("transformers")) {
    AMPT_SKIP(reference, "skipping: GPT-2's ranks or transformers missing (run scripts/bootstrap.sh)");
  }
  const auto dir = make_temp_dir();
  // A GPT-2 as transformers saves it, with GPT-2's tokenizer files beside its weights.
  const auto made = ampt::test::run_process(
      {AMPT_PYTHON, AMPT_SOURCE_DIR "/tests/hf/gpt2_reference.py", "make", dir + "/gpt2", "--n_layer",
       "1", "--n_embd", "32", "--n_head", "2", "--n_positions", "64", "--vocab", "50257",
       "--tokenizer", ampt::test::gpt2_ranks_path()});
  INFO(made.out << made.err);
  REQUIRE(made.exit_code == 0);
  // Documents of different lengths (a mean over documents would differ from one over tokens),
  // the last longer than max_length + 1 tokens.
  write_file(dir + "/data.jsonl",
             "{\"text\": \"Hello there.\"}\n"
             "{\"text\": \"The quick brown fox jumps over the lazy dog.\"}\n\n"
             "{\"text\": \"One, two.\"}\n"
             "{\"text\": \"It was the best of times, it was the worst of times, it was the age of "
             "wisdom, it was the age of foolishness.\"}\n");
  constexpr int kMaxLength = 16;
  // One step at a learning rate too small to move the weights: the first training batch and the
  // final evaluation score the pretrained model. Batches of one: the evaluation's two batches
  // hold different numbers of scored tokens.
  const auto r = run_ampt({"train", "--init_from", dir + "/gpt2", "--dataset",
                           "jsonl:" + dir + "/data.jsonl", "--packing=false", "--max_length",
                           std::to_string(kMaxLength), "--val_fraction", "0.5", "--batch_size", "1",
                           "--max_steps", "1", "--lr", "1e-12", "--mixed_precision", "no",
                           "--device", "cpu", "--output_dir", dir + "/run"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains(": 4 documents, ") &&
                        Catch::Contains(" (GPT-2 BPE from " + dir + "/gpt2/tokenizer.json), ") &&
                        Catch::Contains("one example per document, 1 truncated to 17 tokens; train "
                                        "2 / val 2 examples of up to 16 tokens, padded"));
  CHECK_THAT(r.out, Catch::Contains("val loss ") && Catch::Contains("(2 batches)"));

  const auto reference = ampt::test::run_process(
      {AMPT_PYTHON, AMPT_SOURCE_DIR "/tests/cli/padded_loss_reference.py", dir + "/gpt2",
       dir + "/data.jsonl", std::to_string(kMaxLength)});
  INFO(reference.out << reference.err);
  REQUIRE(reference.exit_code == 0);
  std::vector<std::pair<double, double>> documents;  // (sum of token losses, scored tokens)
  std::istringstream in(reference.out);
  for (double sum = 0, count = 0; in >> sum >> count;) documents.emplace_back(sum, count);
  REQUIRE(documents.size() == 4);
  // The split and the order are seeded, not known here: the first training batch is one
  // document's mean loss, and the validation loss is the mean over the scored tokens of two
  // others, not the mean of their two means.
  const auto summary = read_file(dir + "/run/summary.json");
  const double train_loss = json_field(summary, "initial_loss");
  const double val_loss = json_field(summary, "final_val_loss");
  // A run from init_from evaluates the pretrained weights before its first step, too.
  CHECK(json_field(summary, "initial_val_loss") == Approx(val_loss).margin(1e-6));
  const auto mean = [&](std::size_t d) { return documents[d].first / documents[d].second; };
  int matches = 0;
  for (std::size_t a = 0; a < 4; ++a) {
    for (std::size_t b = a + 1; b < 4; ++b) {
      const double pooled = (documents[a].first + documents[b].first) /
                            (documents[a].second + documents[b].second);
      if (std::abs(val_loss - pooled) > 1e-4) continue;
      CHECK(std::abs(pooled - 0.5 * (mean(a) + mean(b))) > 1e-3);  // the two means differ
      for (std::size_t t = 0; t < 4; ++t) {
        if (t != a && t != b && std::abs(train_loss - mean(t)) < 1e-4) ++matches;
      }
    }
  }
  CHECK(matches == 1);
}
