// Instruction data as a user runs it: `ampt train` on prompt/completion records through GPT-2's
// tokenizer (loss on the answers, finite and falling), `ampt tokenize` writing the loss mask
// beside the shard and `tokens:` training on both, and a bad record stopping with one line.
#include "support/json_field.h"
#include "support/process.h"
#include "support/skip.h"
#include "text/text_fixtures.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

using ampt::test::json_field;
using ampt::test::make_temp_dir;
using ampt::test::read_file;
using ampt::test::run_ampt;
using ampt::test::write_file;

namespace {

// Sums of small numbers: an answer that follows from its prompt.
std::string sums_jsonl(int records) {
  std::string out;
  for (int i = 0; i < records; ++i) {
    const int a = i % 7, b = (i * 3) % 5;
    out += R"({"prompt": "What is )" + std::to_string(a) + " plus " + std::to_string(b) +
           R"(? Answer:", "completion": " )" + std::to_string(a + b) + "\"}\n";
  }
  return out;
}

// GPT-2's ranks are fetched by scripts/bootstrap.sh; false after noting the skip when they are not.
bool have_gpt2() {
  if (ampt::test::have_gpt2_ranks()) return true;
  AMPT_NOTE_SKIP(reference, "skipping: " << ampt::test::gpt2_ranks_path() << " not fetched (run scripts/bootstrap.sh)");
  return false;
}

std::vector<std::string> tiny_gpt(const std::string& dir) {
  return {"--model", "gpt", "--n_layer", "1", "--n_embd", "32", "--n_head", "2", "--block_size", "16",
          "--vocab_size", "50304", "--tokenizer", ampt::test::gpt2_ranks_path(), "--device", "cpu",
          "--output_dir", dir + "/run", "--max_steps", "20", "--log_every", "10", "--lr", "1e-2",
          "--warmup_steps", "3", "--batch_size", "8", "--val_fraction", "0"};
}

}  // namespace

TEST_CASE("cli train: prompt/completion records fine-tune a tiny GPT on their answers",
          "[cli][text][chat]") {
  if (!have_gpt2()) return;
  const auto dir = make_temp_dir();
  write_file(dir + "/sums.jsonl", sums_jsonl(64));
  auto args = tiny_gpt(dir);
  args.insert(args.begin(), {"train", "--dataset", "jsonl:" + dir + "/sums.jsonl"});
  const auto r = run_ampt(args);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("[AMP] Data: jsonl:" + dir + "/sums.jsonl: 64 plain examples, ") &&
                        Catch::Contains("; instruction data, packed 64 examples into ") &&
                        Catch::Contains(" windows of 16: ") &&
                        Catch::Contains("% padding), loss on answers only; train "));
  const auto summary = read_file(dir + "/run/summary.json");
  const double initial = json_field(summary, "initial_loss"), final = json_field(summary, "final_loss");
  CHECK(std::isfinite(final));
  CHECK(final < 0.5 * initial);
}

TEST_CASE("cli tokenize: instruction records get a loss mask beside the shard, and tokens: trains on both",
          "[cli][text][chat][tokens]") {
  if (!have_gpt2()) return;
  const auto dir = make_temp_dir();
  write_file(dir + "/sums.jsonl", sums_jsonl(32));
  const auto tokenized = run_ampt({"tokenize", "--tokenizer", ampt::test::gpt2_ranks_path(), "--out",
                                   dir + "/sums_train.bin", dir + "/sums.jsonl"});
  INFO(tokenized.out << tokenized.err);
  REQUIRE(tokenized.exit_code == 0);
  CHECK_THAT(tokenized.out, Catch::StartsWith("wrote " + dir + "/sums_train.bin and its loss mask " + dir +
                                              "/sums_train.mask: 32 plain examples, "));
  const auto mask = read_file(dir + "/sums_train.mask");
  const auto shard = read_file(dir + "/sums_train.bin");
  CHECK(mask.size() - 1024 == (shard.size() - 1024) / 2);
  CHECK(std::count(mask.begin() + 1024, mask.end(), '\x02') == 32);  // each example's first token

  auto args = tiny_gpt(dir);
  args.insert(args.begin(), {"train", "--dataset", "tokens:" + dir + "/sums_train.bin"});
  args.insert(args.end(), {"--max_steps", "2"});
  const auto r = run_ampt(args);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("(llm.c, loss masks)") &&
                        Catch::Contains("; instruction data, packed 32 examples into "));
}

TEST_CASE("cli: a bad instruction record stops the run with one line naming its line", "[cli][text][chat][errors]") {
  const auto dir = make_temp_dir();
  write_file(dir + "/t.json", R"({"user": {"prefix": "Q: "}, "assistant": {"prefix": " A:", "suffix": "\n"}})");
  const auto error = [&](const std::string& records, std::vector<std::string> extra, int status,
                         const std::string& line) {
    write_file(dir + "/bad.jsonl", records);
    std::vector<std::string> args = {"train", "--model", "gpt-tiny", "--device", "cpu", "--output_dir",
                                     dir + "/run", "--dataset", "jsonl:" + dir + "/bad.jsonl"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_ampt(args);
    INFO(r.out << r.err);
    CHECK(r.exit_code == status);
    CHECK(r.err == "ampt: error: " + line + "\n");
  };
  if (have_gpt2()) {
    const std::vector<std::string> with_tokenizer = {"--tokenizer", ampt::test::gpt2_ranks_path(),
                                                     "--vocab_size", "50304", "--chat_template",
                                                     dir + "/t.json"};
    error("{\"prompt\": \"a\", \"completion\": \"b\"}\n{\"prompt\": \"c\"}\n", with_tokenizer, 1,
          dir + "/bad.jsonl: line 2: no \"completion\": expected a string");
    error("{\"messages\": [{\"role\": \"tool\", \"content\": \"x\"}]}\n", with_tokenizer, 1,
          dir + "/bad.jsonl: line 1: messages[0]: role \"tool\" needs the model's own chat template: the "
                "built-in ones render system, user and assistant (give the tokenizer a chat_template, "
                "or pass --chat_template FILE.jinja)");
  }
  error("{\"prompt\": \"a\", \"completion\": \"b\"}\n", {}, 2,
        "jsonl:" + dir + "/bad.jsonl holds instruction records, which need a tokenizer for their chat "
        "template: name one with --tokenizer, or fine-tune with --init_from");
}
