// What the whole-run tests of the objectives that sample (grpo, distill) share: a byte tokenizer
// with 8 prompts of 8 lengths, and the check that the same seed gives the same run bit for bit
// and that a run resumed mid-way continues it bit for bit, the completions it samples included.
#pragma once

#include "ampt/text/hf_tokenizer_writer.h"
#include "support/json_field.h"
#include "support/process.h"
#include "text/text_fixtures.h"

#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace ampt::test {

// A byte tokenizer (256 bytes, <|endoftext|> the stop token) and 8 prompts of 8 lengths.
struct ByteRolloutFiles {
  std::string dir, tokenizer, prompts;
};

inline ByteRolloutFiles write_byte_rollout_files() {
  ByteRolloutFiles files{make_temp_dir(), "", ""};
  files.tokenizer = files.dir + "/tokenizer.json";
  write_file(files.tokenizer, text::tokenizer_json(toy_vocabulary({})));
  files.prompts = files.dir + "/prompts.jsonl";
  std::string records;
  for (const char* prompt : {"7+5=", "one and", "The sky is", "Two plus two", "Ten minus three", "a b c d e f g",
                             "Say yes or no:", "What is 17 + 25?"}) {
    records += std::string(R"({"prompt": ")") + prompt + "\"}\n";
  }
  write_file(files.prompts, records);
  return files;
}

// The logged steps of the run in `out`.
inline std::vector<std::string> rollout_steps(const std::string& out) {
  return lines_with(read_file(out + "/metrics.jsonl"), "\"grad_norm\"");
}

// A run of 4 steps: the ampt arguments for output directory `out` with `extra` flags.
using RolloutRunArgs = std::function<std::vector<std::string>(const std::string& out, std::vector<std::string> extra)>;

// Runs `dir`/a (saving at step 2) and `dir`/b from the same seed, and `dir`/resumed from a's
// step-2 checkpoint, under `env`: b is a bit for bit (each of `keys` at every step, and
// completions.jsonl), and the resumed run is a's steps 3 and 4, the `shown_per_step` completions
// it shows each step included (draws keyed by the step, the data position the checkpoint's).
inline void check_rerun_and_resume(const RolloutRunArgs& args, const std::string& dir,
                                   const std::vector<std::string>& keys, size_t shown_per_step,
                                   const std::map<std::string, std::string>& env = {}) {
  const auto run = [&](const std::string& out, std::vector<std::string> extra) {
    const auto r = run_ampt(args(out, std::move(extra)), env);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
  };
  run(dir + "/a", {"--save_every", "2"});
  run(dir + "/b", {});
  const auto a = rollout_steps(dir + "/a"), b = rollout_steps(dir + "/b");
  REQUIRE(a.size() == 4);
  REQUIRE(b.size() == 4);
  for (size_t s = 0; s < a.size(); ++s) {
    for (const auto& key : keys) {
      INFO("step " << s + 1 << " " << key);
      CHECK(json_field(a[s], key) == json_field(b[s], key));
    }
  }
  CHECK(read_file(dir + "/a/completions.jsonl") == read_file(dir + "/b/completions.jsonl"));
  run(dir + "/resumed", {"--resume", dir + "/a/ckpt-00000002.pt"});
  const auto a_shown = lines_with(read_file(dir + "/a/completions.jsonl"), "\"completion\"");
  const auto resumed_shown = lines_with(read_file(dir + "/resumed/completions.jsonl"), "\"completion\"");
  REQUIRE(a_shown.size() == 4 * shown_per_step);
  CHECK(resumed_shown == std::vector<std::string>(a_shown.begin() + static_cast<std::ptrdiff_t>(2 * shown_per_step),
                                                  a_shown.end()));
  const auto resumed = rollout_steps(dir + "/resumed");
  REQUIRE(resumed.size() == 2);
  for (size_t s = 0; s < 2; ++s) {
    for (const auto& key : keys) {
      INFO("step " << s + 3 << " " << key);
      CHECK(json_field(resumed[s], key) == json_field(a[s + 2], key));
    }
  }
}

}  // namespace ampt::test
