// GPT presets: override semantics, the GPT-2 parameter counts, and the FLOPs formula.
#include "ampt/core/errors.h"
#include "ampt/models/flops.h"
#include "ampt/models/gpt_presets.h"
#include "ampt/plan/memory_estimate.h"
#include "ampt/models/registry.h"

#include <catch2/catch.hpp>

using ampt::config::Config;
using ampt::data::DataSpec;
using ampt::data::Task;
using ampt::models::resolve_gpt_dims;

namespace {

Config with_model(const char* name) {
  Config config;
  config.model = name;
  return config;
}

// The closed form, written out per tensor of a block:
//   ln_1, ln_2 (weight + bias)       4C
//   attn.c_attn  [3C, C] + [3C]      3C² + 3C
//   attn.c_proj  [C, C] + [C]         C² +  C
//   mlp.c_fc     [4C, C] + [4C]      4C² + 4C
//   mlp.c_proj   [C, 4C] + [C]       4C² +  C
//   ----------------------------------------------
//   per block                        12C² + 13C
// plus ln_f (2C), wte (V·C, which is also the head) and wpe (T·C).
int64_t gpt2_parameters(int64_t L, int64_t C, int64_t V, int64_t T) {
  return L * (12 * C * C + 13 * C) + 2 * C + V * C + T * C;
}

}  // namespace

TEST_CASE("gpt dims: an option left at 0 takes the preset's value, a set one overrides it",
          "[models][gpt][presets]") {
  auto dims = resolve_gpt_dims(with_model("gpt2-124m"));
  CHECK(dims.n_layer == 12);
  CHECK(dims.n_embd == 768);
  CHECK(dims.n_head == 12);
  CHECK(dims.block_size == 1024);
  CHECK(dims.vocab_size == 50304);
  CHECK(dims.dropout == 0.0);

  Config config = with_model("gpt2-350m");
  config.n_layer = 6;
  config.block_size = 256;
  config.dropout = 0.1;
  dims = resolve_gpt_dims(config);
  CHECK(dims.n_layer == 6);
  CHECK(dims.n_embd == 1024);
  CHECK(dims.n_head == 16);
  CHECK(dims.block_size == 256);
  CHECK(dims.vocab_size == 50304);
  CHECK(dims.dropout == 0.1);

  // Plain `gpt` is gpt-tiny plus whatever the options set.
  dims = resolve_gpt_dims(with_model("gpt"));
  CHECK(dims.n_layer == 2);
  CHECK(dims.n_embd == 64);
  CHECK(dims.n_head == 4);
  CHECK(dims.block_size == 64);
  CHECK(dims.vocab_size == 256);
  config = with_model("gpt");
  config.n_embd = 96;
  config.vocab_size = 50304;
  dims = resolve_gpt_dims(config);
  CHECK(dims.n_embd == 96);
  CHECK(dims.vocab_size == 50304);
  CHECK(dims.n_layer == 2);
}

TEST_CASE("gpt dims: n_embd must be a multiple of n_head", "[models][gpt][presets]") {
  Config config = with_model("gpt2-124m");
  config.n_head = 5;
  CHECK_THROWS_AS(resolve_gpt_dims(config), ampt::UsageError);
  CHECK_THROWS_WITH(resolve_gpt_dims(config),
                    "n_embd 768 is not divisible by n_head 5 (model gpt2-124m): n_embd must be a "
                    "multiple of n_head");
}

TEST_CASE("gpt2-124m has GPT-2 small's parameter count and llm.c's FLOPs per token",
          "[models][gpt][presets]") {
  // The same count three ways: the closed form; nanoGPT's GPT(n_layer=12, n_head=12, n_embd=768,
  // block_size=1024, vocab_size=50304, bias=True), whose parameters() sum to Hugging Face gpt2's
  // 124,439,808 (vocab 50257) plus the 47 padding rows of wte, 47 · 768 = 36,096; and the count
  // of the module built here.
  constexpr int64_t expected = 124'475'904;
  CHECK(gpt2_parameters(12, 768, 50304, 1024) == expected);
  CHECK(124'439'808 + (50304 - 50257) * 768 == expected);
  auto model = ampt::models::make_model(with_model("gpt2-124m"),
                                        DataSpec{Task::language_model, {1024}, 50257});
  CHECK(ampt::models::parameter_count(*model.module) == expected);

  // 6·N + 6·L·C·T per token = 6 · 124,475,904 + 6 · 12 · 768 · 1024
  //                         = 746,855,424 + 56,623,104 = 803,478,528,
  // times T = 1024 tokens per sample = 822,762,012,672.
  CHECK(model.tokens_per_sample == 1024);
  CHECK(model.flops_per_sample == 822'762'012'672);
}

TEST_CASE("gpt2-350m has GPT-2 medium's parameter count", "[models][gpt][presets]") {
  // Closed form; Hugging Face gpt2-medium's 354,823,168 (vocab 50257) plus 47 · 1024 = 48,128.
  constexpr int64_t expected = 354'871'296;
  CHECK(gpt2_parameters(24, 1024, 50304, 1024) == expected);
  CHECK(354'823'168 + (50304 - 50257) * 1024 == expected);
  auto model = ampt::models::make_model(with_model("gpt2-350m"),
                                        DataSpec{Task::language_model, {1024}, 50257});
  CHECK(ampt::models::parameter_count(*model.module) == expected);
}

// GPT-2 large and XL are not built here (3 and 6 GB of fp32 weights, seconds of initialisation):
// the count the trainer's estimate makes (memory_estimate.h, checked against built models in
// memory_estimate_test) is checked against the closed form and Hugging Face's published counts.
TEST_CASE("gpt2-774m and gpt2-1558m have GPT-2 large's and XL's parameter counts and FLOPs",
          "[models][gpt][presets]") {
  struct Expected {
    const char* model;
    int64_t n_layer, n_embd, n_head, hugging_face, parameters, flops_per_token;
  };
  // Hugging Face gpt2-large: 774,030,080 (vocab 50257) + 47 · 1280 = 60,160 padding rows.
  // gpt2-xl: 1,557,611,200 + 47 · 1600 = 75,200. FLOPs per token at T = 1024, 6·N + 6·L·C·T:
  // 6 · 774,090,240 + 6 · 36 · 1280 · 1024 = 4,644,541,440 + 283,115,520 = 4,927,656,960;
  // 6 · 1,557,686,400 + 6 · 48 · 1600 · 1024 = 9,346,118,400 + 471,859,200 = 9,817,977,600.
  for (const auto& e : {Expected{"gpt2-774m", 36, 1280, 20, 774'030'080, 774'090'240,
                                 4'927'656'960},
                        Expected{"gpt2-1558m", 48, 1600, 25, 1'557'611'200, 1'557'686'400,
                                 9'817'977'600}}) {
    INFO(e.model);
    const auto dims = resolve_gpt_dims(with_model(e.model));
    CHECK(dims.n_layer == e.n_layer);
    CHECK(dims.n_embd == e.n_embd);
    CHECK(dims.n_head == e.n_head);
    CHECK(dims.block_size == 1024);
    CHECK(dims.vocab_size == 50304);
    CHECK(gpt2_parameters(e.n_layer, e.n_embd, 50304, 1024) == e.parameters);
    CHECK(e.hugging_face + (50304 - 50257) * e.n_embd == e.parameters);
    const auto model_dims = ampt::models::model_dims(with_model(e.model), {}, 0);
    CHECK(ampt::plan::count_parameters(model_dims).total == e.parameters);
    CHECK(ampt::models::gpt_training_flops_per_token(e.parameters, dims, 1024) ==
          e.flops_per_token);
  }
}

TEST_CASE("gpt FLOPs use the trained sequence length, not the context", "[models][gpt][presets]") {
  ampt::models::GptDims dims{2, 64, 4, 64, 256, 0.0};
  // N = 2·(12·64² + 13·64) + 2·64 + 256·64 + 64·64 = 99,968 + 128 + 16,384 + 4,096 = 120,576.
  CHECK(gpt2_parameters(2, 64, 256, 64) == 120'576);
  // At T = 16: 6 · 120,576 + 6 · 2 · 64 · 16 = 723,456 + 12,288 = 735,744 per token.
  CHECK(ampt::models::gpt_training_flops_per_token(120'576, dims, 16) == 735'744);
  auto model =
      ampt::models::make_model(with_model("gpt-tiny"), DataSpec{Task::language_model, {16}, 200});
  CHECK(ampt::models::parameter_count(*model.module) == 120'576);
  CHECK(model.tokens_per_sample == 16);
  CHECK(model.flops_per_sample == 735'744 * 16);
}
