// Every ready-made YAML file in configs/ resolves and trains.
#include "support/process.h"

#include <catch2/catch.hpp>

#include <filesystem>

TEST_CASE("configs: every file in configs/ is valid and trains a few steps", "[cli][configs]") {
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(AMPT_SOURCE_DIR "/configs")) {
    if (entry.path().extension() != ".yaml") continue;
    // They need gpt2 and Llama-3.2-1B in a Hugging Face cache: tests/hf/finetune_recipe_test.cpp
    // makes them.
    if (entry.path().filename() == "finetune_gpt2.yaml" ||
        entry.path().filename() == "finetune_llama.yaml") {
      continue;
    }
    INFO(entry.path().string());
    const auto out = ampt::test::make_temp_dir();
    const auto r = ampt::test::run_ampt({"train", "--config", entry.path().string(), "--max_steps",
                                         "3", "--device", "cpu", "--output_dir", out});
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("Final Loss:"));
    ++checked;
  }
  CHECK(checked >= 3);
}
