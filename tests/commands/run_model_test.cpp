// The model `generate` and `export` rebuild from a run's config (commands/run_model.h): over a
// quantized LoRA base, the frozen tensors are held as the run's training held them; and the
// Policy generation computes with, whose logits are evaluation's.
#include "ampt/commands/run_model.h"

#include "ampt/checkpoint/checkpoint.h"
#include "ampt/config/config.h"
#include "ampt/models/kv_cache.h"
#include "ampt/precision/precision_islands.h"
#include "ampt/train/frozen_base.h"
#include "ampt/train/policy.h"
#include "ampt/train/pretrained.h"
#include "ampt/train/train_state.h"

#include <ATen/CPUGeneratorImpl.h>
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

namespace {

using ampt::config::MixedPrecision;
using ampt::config::OptLevel;

// A tiny GPT or Llama, with rank-4 adapters (the family's default targets) where `lora`, and
// fp32 islands at each level generation's KV path used to go around: an attention module, a
// whole block, the head (a GPT's tied wte; its LayerNorms' frozen bf16 weights cannot take the
// fp32 output of an island before them, so with adapters it has a block island and ln_f).
struct Case {
  std::string family;
  bool lora = true;
  OptLevel opt_level = OptLevel::O1;
  std::string islands;
};

ampt::config::Config tiny(const Case& c, MixedPrecision precision) {
  ampt::config::Config config;
  config.model = c.family;
  config.n_layer = 2;
  config.n_embd = 32;
  config.n_head = 4;
  config.block_size = 16;
  config.vocab_size = 64;
  config.lora_rank = c.lora ? 4 : 0;
  config.amp_opt_level = c.opt_level;
  config.mixed_precision = precision;
  config.keep_fp32_modules = c.islands;
  return config;
}

}  // namespace

TEST_CASE("run policy: generation's prefill and decoding logits equal evaluation's forward, fp32 "
          "and bf16, with adapters and fp32 islands",
          "[commands][generate][lora]") {
  const std::vector<Case> cases = {
      {"gpt", true, OptLevel::O1, "h.1,ln_f"},
      {"gpt", false, OptLevel::O1, "h.0.attn,wte"},
      // O2 adds the norms by role as islands, and computes with half weights.
      {"gpt", false, OptLevel::O2, "h.0.attn"},
      {"llama", true, OptLevel::O1, "layers.0.self_attn,layers.1,lm_head"},
  };
  for (const auto& c : cases) {
    for (const auto precision : {MixedPrecision::no, MixedPrecision::bf16}) {
      const auto config = tiny(c, precision);
      INFO(c.family << (c.lora ? " LoRA " : " full ")
                    << (c.opt_level == OptLevel::O2 ? "O2 " : "O1 ")
                    << (precision == MixedPrecision::bf16 ? "bf16" : "fp32") << ", islands "
                    << c.islands);
      const ampt::data::DataSpec spec{ampt::data::Task::language_model, {config.block_size},
                                      config.vocab_size};
      // Evaluation's side, built as a Run builds it: the Policy over the model, the base frozen.
      ampt::train::Policy trained(
          config, ampt::train::make_model_to_load(config, spec, torch::kCPU), torch::kCPU);
      const auto base = ampt::train::freeze_base(config, trained.precision(), trained.parameters(),
                                                 *trained.model().module, {});
      torch::NoGradGuard no_grad;
      auto draws = at::make_generator<at::CPUGeneratorImpl>(5);
      // Adapters as training leaves them, B no longer zero, so that they change the logits.
      if (c.lora) {
        for (auto& p : trained.parameters()) p.normal_(0.0, 0.2, draws);
      }
      trained.model().module->eval();
      // Generation's side, as `ampt generate --checkpoint` builds it from what a save holds.
      ampt::checkpoint::Checkpoint saved;
      saved.step = 1;
      saved.model = ampt::train::model_tensors(trained.precision(), trained.model());
      saved.base_fingerprint = base.fingerprint;
      const auto generation = ampt::commands::load_run_policy(config, saved, "ckpt", torch::kCPU);
      CHECK(generation->precision().policy().name() == trained.precision().policy().name());

      const auto tokens = torch::randint(0, config.vocab_size, {1, 12}, draws, torch::kInt64);
      const auto evaluated = trained.logits({tokens, tokens});
      // What the islands change: generation without them would differ by this much.
      const auto without_islands = trained.compute([&] {
        const ampt::precision::IslandScope none(nullptr);
        return trained.model().logits({tokens, tokens});
      });
      const double islands_effect = (without_islands - evaluated).abs().max().item<double>();
      // The prefill's blocks compute what the training forward's do, bit for bit; its head reads
      // the last position alone, a GEMM of one row where evaluation's has twelve, and the CPU's
      // kernels sum such a row in another order: measured 4.5e-8 (fp32, |logits| < 0.47, 1.5
      // ulp), and 0 where the head is bf16. A decoding step's single query attends over the
      // cache by another SDPA kernel than the causal one: at most 1.3e-7 (fp32), 0 in bf16.
      // 1e-6 of the logits' size is 3x that, and far below what the islands change in bf16.
      const double tolerance = 1e-6 * evaluated.abs().max().item<double>();
      if (precision == MixedPrecision::bf16) CHECK(islands_effect > 1000 * tolerance);
      ampt::models::KvCache cache;
      const auto prefill = generation->next_logits(tokens.narrow(1, 0, 8), cache);
      CHECK(prefill.scalar_type() == evaluated.scalar_type());
      CHECK((prefill - evaluated.select(1, 7)).abs().max().item<double>() <= tolerance);
      for (int64_t t = 8; t < 12; ++t) {
        INFO("position " << t);
        const auto step = generation->next_logits(tokens.narrow(1, t, 1), cache);
        CHECK((step - evaluated.select(1, t)).abs().max().item<double>() <= tolerance);
      }
    }
  }
}

TEST_CASE("run policy: a precision schedule's checkpoint generates in the stage it was saved in",
          "[commands][generate]") {
  auto config = tiny({"gpt", false, OptLevel::O1, ""}, MixedPrecision::no);
  config.precision_schedule = "fp32:3,bf16";
  const auto made = ampt::train::make_model_to_load(
      config, {ampt::data::Task::language_model, {config.block_size}, config.vocab_size},
      torch::kCPU);
  ampt::NamedTensors weights;
  for (const auto& item : made.module->named_parameters()) {
    weights.emplace_back(item.key(), item.value());
  }
  for (const auto& item : made.module->named_buffers()) {
    weights.emplace_back(item.key(), item.value());
  }
  for (const auto& [step, name] : std::vector<std::pair<int64_t, std::string>>{{1, "FP32"},
                                                                               {5, "BF16"}}) {
    INFO("saved at step " << step);
    ampt::checkpoint::Checkpoint saved;
    saved.step = step;
    saved.model = weights;
    const auto generation = ampt::commands::load_run_policy(config, saved, "ckpt", torch::kCPU);
    CHECK(generation->precision().policy().name() == name);
    torch::NoGradGuard no_grad;
    ampt::models::KvCache cache;
    const auto logits = generation->next_logits(torch::tensor({{3, 1, 4}}), cache);
    CHECK(logits.scalar_type() == (name == "BF16" ? torch::kBFloat16 : torch::kFloat));
  }
}
