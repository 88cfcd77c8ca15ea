// docs/options.md is what the binary says of its flags, and every command's flags share one
// parser: the same errors for a misspelt flag, a bad value and a missing one.
#include "support/process.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

using ampt::test::read_file;
using ampt::test::run_ampt;

TEST_CASE("cli: docs/options.md is the binary's own reference", "[cli][docs]") {
  const auto listed = run_ampt({"config", "--list_options", "--markdown"});
  REQUIRE(listed.exit_code == 0);
  INFO("docs/options.md is stale: run  build/ampt config --list_options --markdown > docs/options.md");
  CHECK(read_file(AMPT_SOURCE_DIR "/docs/options.md") == listed.out);

  // The plain listing names the same flags.
  const auto plain = run_ampt({"config", "--list_options"});
  REQUIRE(plain.exit_code == 0);
  for (const std::string flag : {"--batch_size N", "--max_new_tokens N", "--dtype fp32|bf16",
                                 "--world_size N", "--threads N", "RUN_DIR", "--formats LIST"}) {
    CHECK_THAT(plain.out, Catch::Contains(flag));
  }
  CHECK(run_ampt({"config", "--markdown"}).exit_code == 2);
  CHECK(run_ampt({"config", "--list_options", "--batch_size", "8"}).exit_code == 2);
}

TEST_CASE("cli: every command's flags give the same one-line errors", "[cli][errors]") {
  struct Case {
    std::vector<std::string> args;
    std::string error;
  };
  // One misspelt flag per command, with the nearest flag of that command suggested, and one bad
  // value in the option table's words.
  const std::vector<Case> cases = {
      {{"train", "--bach_size", "8"}, "unknown flag '--bach_size' (did you mean '--batch_size'?)"},
      {{"config", "--list_option"}, "unknown flag '--list_option' (did you mean '--list_options'?)"},
      {{"export", "--checkpiont", "a.pt"}, "unknown flag '--checkpiont' (did you mean '--checkpoint'?)"},
      {{"compare", "--formtas", "bf16"}, "unknown flag '--formtas' (did you mean '--formats'?)"},
      {{"recommend", "--gpu_memory", "24"}, "unknown flag '--gpu_memory' (did you mean '--gpu_memory_gb'?)"},
      {{"plot", "run", "--otu", "a.svg"}, "unknown flag '--otu' (did you mean '--out'?)"},
      {{"generate", "--prompt", "hi", "--top-k", "5"}, "unknown flag '--top-k' (did you mean '--top_k'?)"},
      {{"tokenize", "--tokeniser", "t", "a.txt"}, "unknown flag '--tokeniser' (did you mean '--tokenizer'?)"},
      {{"doctor", "--gpus"}, "unknown flag '--gpus'"},
      {{"export", "--checkpoint", "a.pt", "--out", "b", "--dtype", "fp16"},
       "invalid value 'fp16' for dtype (flag --dtype): expected one of fp32, bf16"},
      {{"recommend", "--world_size", "0"},
       "invalid value '0' for world_size (flag --world_size): expected an integer >= 1"},
      {{"generate", "--prompt", "hi", "--init_from", "x", "--max_new_tokens", "many"},
       "invalid value 'many' for max_new_tokens (flag --max_new_tokens): expected an integer >= 1"},
      {{"tokenize", "--tokenizer", "t", "--out"}, "flag --out needs a value"},
      {{"export", "--checkpoint", "a.pt"}, "ampt export needs --out; see ampt export --help"},
  };
  for (const auto& c : cases) {
    const auto r = run_ampt(c.args);
    INFO("ampt " << c.args.front() << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err == "ampt: error: " + c.error + "\n");
  }
}

TEST_CASE("cli: each command's --help lists its flags from the same table", "[cli]") {
  for (const auto& [command, flag] :
       std::vector<std::pair<std::string, std::string>>{{"export", "--dtype fp32|bf16"},
                                                        {"compare", "--steps N"},
                                                        {"recommend", "--compute_capability X"},
                                                        {"plot", "--out FILE"},
                                                        {"generate", "--temperature X"},
                                                        {"tokenize", "--text_field NAME"},
                                                        {"config", "--list_options[=BOOL]"},
                                                        {"doctor", "-h, --help"}}) {
    const auto help = run_ampt({command, "--help"});
    INFO(command);
    CHECK(help.exit_code == 0);
    CHECK_THAT(help.out, Catch::Contains("Flags of ampt " + command + ":"));
    CHECK_THAT(help.out, Catch::Contains(flag));
  }
}
