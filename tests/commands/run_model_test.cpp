// The model `generate` and `export` rebuild from a run's config (commands/run_model.h): over a
// quantized LoRA base, the frozen tensors are held as the run's training held them.
#include "ampt/commands/run_model.h"

#include "ampt/config/config.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

TEST_CASE("run model: a quantized LoRA base is held in the run's half dtype, its fp32 islands in "
          "fp32, as training holds it",
          "[commands][qlora]") {
  using ampt::config::BaseDtype;
  ampt::config::Config config;
  config.model = "llama";
  config.n_layer = 1;
  config.n_embd = 16;
  config.n_head = 4;
  config.block_size = 8;
  config.vocab_size = 32;
  config.lora_rank = 4;
  config.base_dtype = BaseDtype::int8;
  // bf16 whatever this CPU: asked for by name, an emulated bf16 stays bf16.
  config.mixed_precision = ampt::config::MixedPrecision::bf16;
  config.keep_fp32_modules = "*norm";
  const auto model = ampt::commands::load_run_model(config, std::nullopt, "", torch::kCPU);
  int islands = 0, held = 0;
  for (const auto& item : model.module->named_parameters()) {
    const auto& name = item.key();
    INFO(name << ": " << c10::toString(item.value().scalar_type()));
    if (name.find(".lora_") != std::string::npos) continue;  // trained: fp32
    if (name.ends_with("norm.weight")) {
      ++islands;
      CHECK(item.value().scalar_type() == torch::kFloat);
    } else {
      ++held;
      CHECK(item.value().scalar_type() == torch::kBFloat16);
    }
  }
  // The block's two norms and the final one; the embedding, head and block Linear weights.
  CHECK(islands == 3);
  CHECK(held > 3);
}
