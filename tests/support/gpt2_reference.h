// The references of the GPT-2 tests: tests/hf/gpt2_reference.py (transformers) and GPT-2's real
// tiktoken ranks (.deps/gpt2.tiktoken, fetched by scripts/bootstrap.sh).
#pragma once

#include "support/process.h"
#include "support/python_modules.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace ampt::test {

inline constexpr const char* kGpt2Reference = AMPT_SOURCE_DIR "/tests/hf/gpt2_reference.py";
inline constexpr const char* kGpt2Ranks = AMPT_SOURCE_DIR "/.deps/gpt2.tiktoken";

// Whether transformers and tiktoken import in AMPT_PYTHON and the ranks are there; a test that
// needs them says so with a WARN when they are not.
inline bool have_gpt2_references() {
  return python_has("transformers, tiktoken") && std::filesystem::exists(kGpt2Ranks);
}

// A random GPT-2 with the real vocabulary and GPT-2's tokenizer files, as transformers saves it,
// in `dir`; `flags` are gpt2_reference.py make's dimensions.
inline void make_pretrained_gpt2(const std::string& dir, const std::vector<std::string>& flags) {
  std::vector<std::string> argv{AMPT_PYTHON, kGpt2Reference, "make", dir, "--vocab", "50257",
                                "--tokenizer", kGpt2Ranks};
  argv.insert(argv.end(), flags.begin(), flags.end());
  const auto r = run_process(argv);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
}

}  // namespace ampt::test
