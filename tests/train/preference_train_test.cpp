// Preference tuning as whole runs, against TRL 1.16's own trainers (preference_reference.py:
// DPOTrainer for dpo and ipo, CPOTrainer for simpo, ORPOTrainer for orpo) on a tiny Llama and
// Qwen2 with GPT-2's tokenizer, fp32, the same four records in every step: the loss and TRL's six
// figures for 10 AdamW steps, with full fine-tuning (a frozen copy as DPO's reference) and with a
// peft adapter continued (its starting weights as the reference, as TRL keeps them). Measured,
// TRL's own fp32 and fp64 runs stay within 5e-7 of each other (relative; IPO's loss 3.3e-6); the
// rewards and margins are differences of summed log-probabilities near 40, so their tolerance is
// relative to beta times those sums. Also: the tokens are TRL's, a resumed run continues bit for
// bit (the reference stays the starting model), evaluation and the files report the figures,
// and each bad input is one line.
#include "ampt/core/json_reader.h"
#include "ampt/data/loss_mask.h"
#include "ampt/data/token_file.h"
#include "ampt/text/tokenize_chats.h"
#include "ampt/text/tokenizer_files.h"
#include "distributed/rank_processes.h"
#include "support/json_field.h"
#include "support/pretrained_reference.h"
#include "support/process.h"
#include "support/skip.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <vector>

using namespace ampt::test;

namespace {

constexpr const char* kPreferenceReference = AMPT_SOURCE_DIR "/tests/train/preference_reference.py";
constexpr const char* kLlamaMaker = AMPT_SOURCE_DIR "/tests/hf/llama_reference.py";
constexpr const char* kAdapterMaker = AMPT_SOURCE_DIR "/tests/hf/lora_reference.py";
constexpr const char* kGpt2Tiktoken = AMPT_SOURCE_DIR "/.deps/gpt2.tiktoken";
constexpr int kSteps = 10;

bool have_trl() {
  return python_has("transformers, peft, trl") && std::filesystem::exists(kGpt2Tiktoken);
}

// Four standard records, answers of 2 to 6 tokens, each starting with a space (a token boundary,
// so that TRL's common-prefix rule keeps the whole prompt).
std::string write_records(const std::string& dir) {
  const auto path = dir + "/prefs.jsonl";
  write_file(path,
             R"({"prompt": "The sky is", "chosen": " blue.", "rejected": " green."})" "\n"
             R"({"prompt": "Two plus two is", "chosen": " four.", "rejected": " five, I think."})" "\n"
             R"({"prompt": "Water boils at", "chosen": " one hundred degrees.", "rejected": " ten."})" "\n"
             R"({"prompt": "The capital of France is", "chosen": " Paris.", "rejected": " Rome, surely."})" "\n");
  return path;
}

// A tiny `flavour` model with GPT-2's tokenizer files.
std::string make_model(const std::string& flavour) {
  return make_reference_model(kLlamaMaker,
                              {"--flavour", flavour, "--vocab", "50257", "--tokenizer", kGpt2Tiktoken});
}

using StepFigures = std::map<std::string, double>;

std::vector<StepFigures> parse_steps(const ampt::JsonValue& list) {
  std::vector<StepFigures> steps;
  for (const auto& step : list.items) {
    StepFigures figures;
    for (const auto& [key, value] : step.members) {
      if (value.kind == ampt::JsonValue::Kind::number) figures[key] = value.number;
    }
    steps.push_back(std::move(figures));
  }
  return steps;
}

// The steps a run in `out` logged in its metrics.jsonl.
std::vector<StepFigures> logged_steps(const std::string& out) {
  ampt::JsonValue list;
  list.kind = ampt::JsonValue::Kind::array;
  for (const auto& line : lines_with(read_file(out + "/metrics.jsonl"), "\"grad_norm\"")) {
    list.items.push_back(ampt::parse_json(line));
  }
  return parse_steps(list);
}

// TRL's steps for `loss` on `records` (all four in every step).
std::vector<StepFigures> trl_steps(const std::string& model, const std::string& records,
                                   const std::string& loss, std::vector<std::string> extra) {
  std::vector<std::string> argv{AMPT_PYTHON, kPreferenceReference, "train", model, records,
                                "--loss", loss, "--steps", std::to_string(kSteps), "--batch_size",
                                "4", "--lr", "1e-3", "--beta1", "0.9", "--beta2", "0.999", "--eps",
                                "1e-8"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  const auto r = run_process(argv);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return parse_steps(ampt::parse_json(r.out));
}

// ampt's logged steps (metrics.jsonl) for the same run.
std::vector<StepFigures> ampt_steps(const std::string& init_from, const std::string& records,
                                    const std::string& out, std::vector<std::string> extra) {
  std::vector<std::string> args{
      "train", "--init_from", init_from, "--dataset", "jsonl:" + records, "--batch_size", "4",
      "--max_steps", std::to_string(kSteps), "--log_every", "1", "--lr", "1e-3",
      "--warmup_steps", "0", "--min_lr_ratio", "1", "--weight_decay", "0", "--max_grad_norm", "0",
      "--adam_beta1", "0.9", "--adam_beta2", "0.999", "--adam_eps", "1e-8", "--mixed_precision",
      "no", "--val_fraction", "0", "--data_sampling", "sequential", "--loader_workers", "0",
      "--device", "cpu", "--save_final=false", "--output_dir", out};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = run_ampt(args);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return logged_steps(out);
}

// Step for step: the loss and the log-probabilities to 1e-4 relative, the rewards and margins to
// 1e-4 of beta times the log-probabilities they are differences of, the accuracies exactly.
void check_steps(const std::vector<StepFigures>& ours, const std::vector<StepFigures>& trl,
                 double beta) {
  REQUIRE(ours.size() == trl.size());
  for (size_t s = 0; s < trl.size(); ++s) {
    const double scale = beta * std::abs(trl[s].at("logps/chosen"));
    for (const auto& [key, want] : trl[s]) {
      INFO("step " << s + 1 << ", " << key);
      REQUIRE(ours[s].count(key) == 1);
      const double got = ours[s].at(key);
      if (key == "rewards/accuracies") {
        CHECK(got == want);
      } else if (key.starts_with("rewards/")) {
        CHECK(std::abs(got - want) <= 1e-4 * std::max(scale, std::abs(want)));
      } else {
        CHECK(std::abs(got - want) <= 1e-4 * std::abs(want));
      }
    }
  }
}

// The token cache of the run in `out` holds TRL's tokens of `records`: each record's prompt and
// chosen answer, then its prompt and rejected answer, answers scored, rejected ones marked.
void check_tokens(const std::string& model, const std::string& records, const std::string& out) {
  const auto tokenized = run_process({AMPT_PYTHON, kPreferenceReference, "tokenize", model, records});
  REQUIRE(tokenized.exit_code == 0);
  std::vector<int64_t> want;
  std::vector<uint8_t> want_mask;
  for (const auto& record : ampt::parse_json(tokenized.out).items) {
    for (const char* answer : {"chosen_ids", "rejected_ids"}) {
      const auto& prompt = record.find("prompt_ids")->items;
      const auto& ids = record.find(answer)->items;
      const uint8_t kind = std::string_view(answer) == "rejected_ids" ? ampt::text::kRejectedExample : 0;
      for (size_t i = 0; i < prompt.size() + ids.size(); ++i) {
        want.push_back(static_cast<int64_t>(i < prompt.size() ? prompt[i].number : ids[i - prompt.size()].number));
        want_mask.push_back(static_cast<uint8_t>(kind | (i == 0 ? ampt::text::kExampleStart : 0) |
                                                 (i >= prompt.size() ? ampt::text::kScoredToken : 0)));
      }
    }
  }
  std::string shard;
  for (const auto& entry : std::filesystem::directory_iterator(out + "/token_cache")) {
    if (entry.path().extension() == ".bin") shard = entry.path().string();
  }
  const auto file = ampt::data::open_token_file(shard);
  const auto mask = ampt::data::open_loss_mask(ampt::data::loss_mask_path(shard), file.span);
  REQUIRE(file.span.count == static_cast<int64_t>(want.size()));
  const auto* ids = static_cast<const uint16_t*>(file.span.data);
  const auto* bits = static_cast<const uint8_t*>(mask.data);
  CHECK(std::vector<int64_t>(ids, ids + file.span.count) == want);
  CHECK(std::vector<uint8_t>(bits, bits + mask.count) == want_mask);
}

}  // namespace

TEST_CASE("preference: dpo and ipo fine-tune a tiny Llama as TRL's DPOTrainer does, its tokens too",
          "[train][preference][reference][cli]") {
  if (!have_trl()) AMPT_SKIP(reference, "skipping: transformers, peft, trl or .deps/gpt2.tiktoken missing");
  const auto dir = make_temp_dir();
  const auto records = write_records(dir);
  const auto model = make_model("llama");

  // The tokens: the cache ampt wrote holds TRL's prompt and answer ids, each answer's EOS scored.
  const auto dpo = ampt_steps(model, records, dir + "/dpo", {"--objective", "dpo", "--beta", "0.1"});
  check_tokens(model, records, dir + "/dpo");
  {
    INFO("dpo");
    check_steps(dpo, trl_steps(model, records, "dpo", {"--beta", "0.1"}), 0.1);
  }
  INFO("ipo");
  check_steps(ampt_steps(model, records, dir + "/ipo", {"--objective", "ipo", "--beta", "0.1"}),
              trl_steps(model, records, "ipo", {"--beta", "0.1"}), 0.1);
}

TEST_CASE("preference: conversational records through the tokenizer's own Llama-3 chat template "
          "follow TRL's DPOTrainer, its tokens too",
          "[train][preference][reference][cli]") {
  if (!have_trl()) AMPT_SKIP(reference, "skipping: transformers, peft, trl or .deps/gpt2.tiktoken missing");
  const auto dir = make_temp_dir();
  const auto model = dir + "/model";
  const auto made = run_process({AMPT_PYTHON, kPreferenceReference, "chat_tokenizer", model});
  INFO(made.err);
  REQUIRE(made.exit_code == 0);
  const auto vocab = std::to_string(static_cast<int64_t>(ampt::parse_json(made.out).number));
  REQUIRE(run_process({AMPT_PYTHON, kLlamaMaker, "make", model, "--vocab", vocab}).exit_code == 0);
  const auto records = dir + "/conversations.jsonl";
  const auto turn = [](const std::string& role, const std::string& content) {
    return fmt::format(R"({{"role": "{}", "content": "{}"}})", role, content);
  };
  std::string text;
  for (const auto& [prompt, chosen, rejected] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {turn("user", "What colour is the sky?"), "It is blue.", "It is green."},
           {turn("user", "Water boils at?"), "One hundred degrees.", "Paris."},
           {turn("system", "Be brief.") + ", " + turn("user", "Hi"), "Hello.", "No."},
           {turn("user", "Is the sky blue?"), "Yes.", "No, it is green."}}) {
    text += fmt::format(R"({{"prompt": [{}], "chosen": [{}], "rejected": [{}]}})" "\n", prompt,
                        turn("assistant", chosen), turn("assistant", rejected));
  }
  write_file(records, text);
  // The tokenizer carries Llama-3's Jinja template, which renders the records, as in TRL.
  CHECK(ampt::text::records_template({records}, ampt::text::InputFormat::records,
                                     ampt::text::load_tokenizer(model), "", records)
            .jinja != nullptr);
  const auto ours = ampt_steps(model, records, dir + "/run", {"--objective", "dpo"});
  check_tokens(model, records, dir + "/run");
  check_steps(ours, trl_steps(model, records, "dpo", {"--beta", "0.1"}), 0.1);
}

TEST_CASE("preference: cDPO with RPO's chosen NLL, continuing a peft adapter on a tiny Qwen2, "
          "follows TRL's DPOTrainer, "
          "the adapter as it started the reference",
          "[train][preference][lora][reference][cli]") {
  if (!have_trl()) AMPT_SKIP(reference, "skipping: transformers, peft, trl or .deps/gpt2.tiktoken missing");
  const auto dir = make_temp_dir();
  const auto records = write_records(dir);
  const auto model = make_model("qwen2");
  const auto adapter = dir + "/adapter";
  const auto made = run_process({AMPT_PYTHON, kAdapterMaker, "init", model, adapter, "--rank", "4",
                                 "--alpha", "8", "--targets", "q_proj,v_proj"});
  INFO(made.out << made.err);
  REQUIRE(made.exit_code == 0);
  // cDPO and RPO's chosen NLL in one run: both are weighted sums of TRL's own losses.
  const std::vector<std::string> loss{"--beta", "0.2", "--label_smoothing", "0.1", "--rpo_alpha",
                                      "0.5"};
  auto flags = loss;
  flags.insert(flags.begin(), {"--objective", "dpo"});
  const auto ours = ampt_steps(adapter, records, dir + "/run", flags);
  auto trl_flags = loss;
  trl_flags.insert(trl_flags.end(), {"--adapter", adapter});
  check_steps(ours, trl_steps(model, records, "dpo", trl_flags), 0.2);
  // The reference is the adapter as it started: the first step's rewards are 0.
  CHECK(ours.front().at("rewards/chosen") == 0.0);
  CHECK_THAT(read_file(dir + "/run/metrics.jsonl"), Catch::Contains("\"rewards/margins\""));
}

TEST_CASE("preference: simpo and orpo fine-tune a tiny Llama as TRL's CPOTrainer and ORPOTrainer do",
          "[train][preference][reference][cli]") {
  if (!have_trl()) AMPT_SKIP(reference, "skipping: transformers, peft, trl or .deps/gpt2.tiktoken missing");
  const auto dir = make_temp_dir();
  const auto records = write_records(dir);
  const auto model = make_model("llama");
  for (const auto& [objective, beta, loss] :
       std::vector<std::tuple<std::string, double, std::vector<std::string>>>{
           {"simpo", 2.0, {"--beta", "2.0", "--simpo_gamma", "0.5"}},
           {"orpo", 0.1, {"--orpo_lambda", "0.1"}}}) {
    INFO(objective);
    auto flags = loss;
    flags.insert(flags.begin(), {"--objective", objective});
    check_steps(ampt_steps(model, records, dir + "/" + objective, flags),
                trl_steps(model, records, objective, loss), beta);
  }
}

namespace {

// A tiny random GPT reading GPT-2's tokenizer; `extra` flags come last.
std::vector<std::string> gpt_preference_args(const std::string& records, const std::string& out,
                                             std::vector<std::string> extra) {
  std::vector<std::string> args{
      "train", "--model", "gpt", "--n_layer", "1", "--n_embd", "32", "--n_head", "2",
      "--block_size", "32", "--vocab_size", "50257", "--tokenizer", kGpt2Tiktoken, "--dataset",
      "jsonl:" + records, "--batch_size", "2", "--max_steps", "6", "--log_every", "1", "--lr",
      "1e-2", "--warmup_steps", "0", "--mixed_precision", "no", "--loader_workers", "0",
      "--device", "cpu", "--seed", "3", "--output_dir", out};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

ProcessResult run_preference(const std::vector<std::string>& args) {
  auto r = run_ampt(args);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return r;
}

}  // namespace

// Each rank's token cache is a directory of its own (AMPT_TOKEN_CACHE), as on separate nodes:
// rank 0's holds the reference table (an earlier one-process run wrote it), rank 1's does not.
// Under ZeRO-3 every forward is collective: both ranks make the pass (rank 0 alone reading the
// table would leave rank 1's forwards without a partner), and train on.
TEST_CASE("preference: --precompute_ref_logps on 2 ZeRO-3 ranks, only one of which has the "
          "table cached, makes the pass on both",
          "[train][preference][dist][zero3][cli]") {
  if (!std::filesystem::exists(kGpt2Tiktoken)) {
    AMPT_SKIP(reference, "skipping: .deps/gpt2.tiktoken (scripts/bootstrap.sh) missing");
  }
  const auto dir = make_temp_dir();
  const auto records = write_records(dir);
  const std::vector<std::string> dpo{"--objective", "dpo", "--val_fraction", "0",
                                     "--precompute_ref_logps"};
  // One process with the ranks' global batch of 2.
  auto single = dpo;
  single.insert(single.end(), {"--token_cache", dir + "/cache0"});
  run_preference(gpt_preference_args(records, dir + "/single", single));
  auto ranks_args = gpt_preference_args(records, dir + "/out", dpo);
  ranks_args.insert(ranks_args.begin(), AMPT_BINARY);
  ranks_args.insert(ranks_args.end(), {"--batch_size", "1", "--zero_stage", "3", "--dist_timeout", "20"});
  const auto ranks = run_rank_processes(2, ranks_args, dir + "/logs", [&](int r) {
    return std::map<std::string, std::string>{{"AMPT_TOKEN_CACHE", fmt::format("{}/cache{}", dir, r)}};
  });
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << ":\n" << ranks.out[r] << ranks.err[r]);
    REQUIRE(ranks.status[r] == 0);
  }
  INFO(ranks.out[0]);
  CHECK_THAT(ranks.out[0], Catch::Contains("log-probabilities of the 4 pairs precomputed in"));
  const auto alone = step_losses(read_file(dir + "/single/metrics.jsonl"));
  const auto sharded = step_losses(read_file(dir + "/out/metrics.jsonl"));
  REQUIRE(alone.size() == 6);
  REQUIRE(sharded.size() == 6);
  // Measured 2.3e-7 apart at most: ZeRO-3's reduce-scatter sums the gradients in another order.
  for (size_t i = 0; i < 6; ++i) {
    INFO("step " << i + 1);
    CHECK(sharded[i] == Approx(alone[i]).epsilon(2e-6));
  }
}

TEST_CASE("preference: the log, metrics and summary carry TRL's figures, a resumed dpo run continues "
          "bit for bit, precomputed reference log-probabilities train alike, a fresh adapter's "
          "reference is its base, tokenized shards train alike",
          "[train][preference][checkpoint][lora][cli]") {
  if (!std::filesystem::exists(kGpt2Tiktoken)) {
    AMPT_SKIP(reference, "skipping: .deps/gpt2.tiktoken (scripts/bootstrap.sh) missing");
  }
  const auto dir = make_temp_dir();
  const auto records = write_records(dir);
  const auto whole = run_preference(gpt_preference_args(
      records, dir + "/whole",
      {"--objective", "dpo", "--val_fraction", "0.5", "--eval_every", "3", "--save_every", "3"}));
  CHECK_THAT(whole.out, Catch::Contains("[Objective] dpo: DPO's sigmoid loss, beta 0.1; reference: "
                                        "a frozen copy of the model as training starts"));
  CHECK_THAT(whole.out, Catch::Contains("preference pairs, packed 4 pairs into 2 windows of 32, "
                                        "each sequence its own example"));
  CHECK_THAT(whole.out, Catch::Contains("train 1 / val 1 windows of 32"));
  CHECK_THAT(whole.out, Catch::Contains("[Objective] rewards/chosen 0.0000, rewards/rejected 0.0000, "
                                        "rewards/accuracies 0.0000, rewards/margins 0.0000, logps/chosen"));
  CHECK_THAT(whole.out, Catch::Contains("Reward Accuracy:  "));
  const auto metrics = read_file(dir + "/whole/metrics.jsonl");
  const auto evals = lines_with(metrics, "\"val_loss\"");
  REQUIRE(evals.size() == 2);
  CHECK_THAT(evals.back(), Catch::Contains("\"val_rewards/accuracies\": "));
  CHECK(json_field(evals.back(), "val_batches") == 1);
  CHECK_THAT(read_file(dir + "/whole/summary.json"), Catch::Contains("\"final_rewards/margins\": "));
  const auto full = step_losses(metrics);
  REQUIRE(full.size() == 6);
  CHECK(full.front() == Approx(std::log(2.0)).epsilon(1e-6));  // policy = reference at the start
  CHECK(full.back() < full.front());

  // The reference is the model as training started, not the checkpoint's: the resumed steps are
  // the same steps.
  run_preference(gpt_preference_args(records, dir + "/resumed",
                                     {"--objective", "dpo", "--val_fraction", "0.5", "--eval_every",
                                      "3", "--resume", dir + "/whole/ckpt-00000003.pt"}));
  const auto resumed = step_losses(read_file(dir + "/resumed/metrics.jsonl"));
  REQUIRE(resumed.size() == 3);
  for (int i = 0; i < 3; ++i) CHECK(resumed[i] == full[3 + i]);

  // --precompute_ref_logps: the same reference, computed once before training.
  const auto precomputed = run_preference(gpt_preference_args(
      records, dir + "/precomputed",
      {"--objective", "dpo", "--val_fraction", "0.5", "--eval_every", "3",
       "--precompute_ref_logps"}));
  CHECK_THAT(precomputed.out, Catch::Contains("reference: the model as training starts, its "
                                              "log-probabilities of the 4 pairs precomputed in"));
  const auto from_table = step_losses(read_file(dir + "/precomputed/metrics.jsonl"));
  REQUIRE(from_table.size() == full.size());
  for (size_t i = 0; i < full.size(); ++i) CHECK(from_table[i] == Approx(full[i]).epsilon(1e-6));
  // The table is kept beside the token cache: a run of the same pairs from the same weights reads
  // it instead of making the pass again, and takes the same steps.
  const auto cache = dir + "/precomputed/token_cache";
  std::vector<std::string> tables;
  for (const auto& entry : std::filesystem::directory_iterator(cache)) {
    if (entry.path().filename().string().starts_with("ref-logps-")) tables.push_back(entry.path().string());
  }
  REQUIRE(tables.size() == 1);
  CHECK_THAT(precomputed.out, Catch::Contains("kept in " + tables[0]));
  const std::vector<std::string> cached{"--objective", "dpo", "--val_fraction", "0.5",
                                        "--eval_every", "3", "--precompute_ref_logps",
                                        "--token_cache", cache, "--save_every", "3"};
  const auto reread = run_preference(gpt_preference_args(records, dir + "/reread", cached));
  CHECK_THAT(reread.out, Catch::Contains("log-probabilities of the pairs read from " + tables[0]));
  CHECK(step_losses(read_file(dir + "/reread/metrics.jsonl")) == from_table);
  // Resumed on the same pairs, it reads the table again and continues the same steps.
  auto same = gpt_preference_args(records, dir + "/same", cached);
  same.insert(same.end(), {"--resume", dir + "/reread/ckpt-00000003.pt"});
  CHECK_THAT(run_preference(same).out, Catch::Contains("read from " + tables[0]));
  const auto continued = step_losses(read_file(dir + "/same/metrics.jsonl"));
  REQUIRE(continued.size() == 3);
  for (int i = 0; i < 3; ++i) CHECK(continued[i] == from_table[3 + i]);
  // A resume onto other pairs would train against another reference: refused in one line,
  // before any pass over them.
  auto other_records = read_file(records);
  other_records.replace(other_records.find(" blue."), 6, " azure.");
  write_file(dir + "/other.jsonl", other_records);
  auto onto_other = gpt_preference_args(dir + "/other.jsonl", dir + "/other", cached);
  onto_other.insert(onto_other.end(), {"--resume", dir + "/reread/ckpt-00000003.pt"});
  const auto refused_resume = run_ampt(onto_other);
  CHECK(refused_resume.exit_code != 0);
  CHECK_THAT(refused_resume.err,
             Catch::Contains("checkpoint '" + dir + "/reread/ckpt-00000003.pt' trained against "
                             "reference log-probabilities of other preference pairs (data "));
  CHECK_THAT(refused_resume.err, Catch::Contains("resume with the data it trained on"));
  CHECK_FALSE(std::filesystem::exists(dir + "/other/metrics.jsonl"));

  // A fresh adapter (B = 0) starts as its base: the base with the adapters off is the reference.
  const auto lora = run_preference(gpt_preference_args(
      records, dir + "/lora", {"--objective", "dpo", "--lora_rank", "4", "--val_fraction", "0"}));
  CHECK_THAT(lora.out, Catch::Contains("reference: the base with the LoRA adapters off (no second model)"));
  const auto lora_losses = step_losses(read_file(dir + "/lora/metrics.jsonl"));
  CHECK(lora_losses.front() == Approx(std::log(2.0)).epsilon(1e-6));
  CHECK(lora_losses.back() < lora_losses.front());

  // `ampt tokenize` writes preference shards: trained from them, the same steps as from the
  // records.
  const auto shard = dir + "/prefs_train.bin";
  const auto tokenized = run_ampt({"tokenize", "--tokenizer", kGpt2Tiktoken, "--out", shard, records});
  INFO(tokenized.out << tokenized.err);
  REQUIRE(tokenized.exit_code == 0);
  std::vector<std::vector<double>> runs;
  for (const std::string data : {"jsonl:" + records, "tokens:" + shard}) {
    const auto out = dir + "/" + std::to_string(runs.size());
    auto args = gpt_preference_args(records, out, {"--objective", "simpo", "--val_fraction", "0"});
    std::ranges::find(args, "jsonl:" + records)->assign(data);
    run_preference(args);
    runs.push_back(step_losses(read_file(out + "/metrics.jsonl")));
  }
  REQUIRE(runs[0].size() == 6);
  for (size_t i = 0; i < runs[0].size(); ++i) CHECK(runs[1][i] == Approx(runs[0][i]).epsilon(1e-6));
}

TEST_CASE("preference: pairs packed into windows, each sequence its own example, train as padded "
          "pairs do",
          "[train][preference][packing][cli]") {
  if (!std::filesystem::exists(kGpt2Tiktoken)) {
    AMPT_SKIP(reference, "skipping: .deps/gpt2.tiktoken (scripts/bootstrap.sh) missing");
  }
  const auto dir = make_temp_dir();
  const auto records = write_records(dir);
  // Every step on all four pairs: batch 4 pairs padded, and the two windows they pack into.
  for (const std::string objective : {"dpo", "orpo"}) {
    INFO(objective);
    std::vector<std::vector<StepFigures>> runs;
    for (const std::string packing : {"--packing=false", "--packing=true"}) {
      const auto out = dir + "/" + objective + packing.substr(10);
      const auto r = run_preference(gpt_preference_args(
          records, out, {"--objective", objective, "--val_fraction", "0", "--batch_size", "4",
                         "--data_sampling", "sequential", "--max_steps", "10", packing}));
      CHECK_THAT(r.out, Catch::Contains(packing == "--packing=true" ? "packed 4 pairs into 2 windows"
                                                                    : "each sequence padded to its own row"));
      runs.push_back(logged_steps(out));
    }
    REQUIRE(runs[0].size() == 10);
    REQUIRE(runs[1].size() == 10);
    // The first step's per-pair log-probabilities, before any update: only the summation order
    // differs.
    CHECK(runs[1][0].at("logps/chosen") == Approx(runs[0][0].at("logps/chosen")).epsilon(1e-5));
    CHECK(runs[1][0].at("logps/rejected") == Approx(runs[0][0].at("logps/rejected")).epsilon(1e-5));
    for (size_t i = 0; i < 10; ++i) {
      INFO("step " << i + 1);
      CHECK(runs[1][i].at("loss") == Approx(runs[0][i].at("loss")).epsilon(1e-4));
    }
  }
}

TEST_CASE("preference: bad records, objectives and options are one line each",
          "[train][preference][errors][cli]") {
  if (!std::filesystem::exists(kGpt2Tiktoken)) {
    AMPT_SKIP(reference, "skipping: .deps/gpt2.tiktoken (scripts/bootstrap.sh) missing");
  }
  const auto dir = make_temp_dir();
  const auto records = write_records(dir);
  const auto refused = [&](const std::string& data, std::vector<std::string> extra,
                           const std::string& message) {
    const auto r = run_ampt(gpt_preference_args(data, dir + "/out", std::move(extra)));
    INFO(r.out << r.err);
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, Catch::Contains(message));
    CHECK(r.err.find("terminate called") == std::string::npos);
  };
  write_file(dir + "/missing.jsonl", R"({"prompt": "a", "chosen": "b"})" "\n");
  refused(dir + "/missing.jsonl", {"--objective", "dpo"},
          "missing.jsonl: line 1: no \"rejected\": a preference record has \"prompt\", \"chosen\" "
          "and \"rejected\"");
  write_file(dir + "/typed.jsonl", R"({"prompt": "a", "chosen": ["b"], "rejected": "c"})" "\n");
  refused(dir + "/typed.jsonl", {"--objective", "dpo"},
          "typed.jsonl: line 1: \"chosen\" is a list but \"prompt\" a string");
  refused(records, {}, "holds preference records (prompt, chosen, rejected): train on them with "
                       "--objective dpo, ipo, simpo or orpo");
  write_file(dir + "/sft.jsonl", R"({"prompt": "a", "completion": "b"})" "\n");
  refused(dir + "/sft.jsonl", {"--objective", "dpo"},
          "--objective dpo learns from preference records (\"prompt\", \"chosen\", \"rejected\"), "
          "and jsonl:" + dir + "/sft.jsonl holds instruction records");
  const auto r = run_ampt({"train", "--model", "gpt", "--objective", "orpo", "--max_steps", "1",
                           "--output_dir", dir + "/synthetic"});
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Catch::Contains("--objective orpo learns from preference records (\"prompt\", "
                                    "\"chosen\", \"rejected\") in jsonl:, parquet: or arrow: data or "
                                    "its tokens: shards, and dataset 'synthetic' is neither"));
  refused(records, {"--objective", "dpo", "--simpo_gamma", "1"},
          "simpo_gamma (flag --simpo_gamma) is an option of the simpo objective, and this run's "
          "objective is dpo: drop it or set --objective");
  refused(records, {"--objective", "orpo", "--beta", "0.2"},
          "beta (flag --beta) is an option of the dpo, ipo, simpo and grpo objectives, and this run's "
          "objective is orpo");
  refused(records, {"--objective", "simpo", "--precompute_ref_logps"},
          "precompute_ref_logps (flag --precompute_ref_logps) is an option of the dpo and ipo "
          "objectives, and this run's objective is simpo");
  refused(records, {"--objective", "orpo", "--rpo_alpha", "1"},
          "rpo_alpha (flag --rpo_alpha) is an option of the dpo and ipo objectives, and this run's "
          "objective is orpo");
  refused(records, {"--objective", "dpo", "--zero_stage", "3"},
          "--objective dpo under zero_stage 3 would hold its reference, a copy of the model, whole "
          "on every rank: add --precompute_ref_logps");
  refused(records, {"--objective", "dpo", "--train_on_prompt"},
          "--train_on_prompt scores the prompts of instruction records; a preference objective "
          "compares answers only: drop it");
}

TEST_CASE("preference: a sparse model trains on its logits alone, without the router's losses, as "
          "TRL's trainers do by default",
          "[train][preference][moe][cli]") {
  if (!std::filesystem::exists(kGpt2Tiktoken)) {
    AMPT_SKIP(reference, "skipping: .deps/gpt2.tiktoken (scripts/bootstrap.sh) missing");
  }
  const auto dir = make_temp_dir();
  const auto dpo = [&](const std::string& out, std::vector<std::string> extra) {
    std::vector<std::string> args{"train", "--model", "qwen3-moe", "--vocab_size", "50304",
                                  "--tokenizer", kGpt2Tiktoken, "--dataset",
                                  "jsonl:" + write_records(dir), "--objective", "dpo",
                                  "--max_steps", "3", "--batch_size", "4", "--block_size", "64",
                                  "--val_fraction", "0", "--log_every", "1", "--device", "cpu",
                                  "--output_dir", dir + "/" + out};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = run_preference(args);
    CHECK_THAT(read_file(dir + "/" + out + "/metrics.jsonl"), !Catch::Contains("aux_loss"));
    return std::pair{r, logged_steps(dir + "/" + out)};
  };
  const auto [r, steps] = dpo("run", {});
  CHECK_THAT(r.out, Catch::Contains("no router losses under a preference objective"));
  REQUIRE(steps.size() == 3);
  // The first step's policy is its reference: DPO's loss is -log sigmoid(0) = ln 2, and the
  // presets' load-balancing loss (x 0.001, 2.0 at the start as an lm run logs it) would add
  // 2e-3 to it.
  CHECK(std::abs(steps[0].at("loss") - std::log(2.0)) < 1e-6);
  CHECK(steps[0].at("rewards/margins") == 0.0);
  // Nor do the router's losses reach the gradients: without them the run is the same bit for bit.
  const auto without = dpo("without", {"--router_aux_loss_coef", "0", "--router_z_loss_coef", "0"}).second;
  REQUIRE(without.size() == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(without[i].at("loss") == steps[i].at("loss"));
}
