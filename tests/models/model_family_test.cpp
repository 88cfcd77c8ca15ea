// The table of model families: every --model value builds a family and every family and preset
// is a --model value, the lookups by name, and what the rest of ampt reads of each entry.
#include "ampt/config/describe.h"
#include "ampt/models/catalog.h"
#include "ampt/models/model_family.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

using ampt::models::family_of;
using ampt::models::find_family;
using ampt::models::model_families;
using ampt::models::model_names;
using ampt::models::transformer_model_kinds;

TEST_CASE("model families: --model takes exactly the families and their presets, in order",
          "[models][family]") {
  // config knows no name: resolve() and --help take them from models::catalog(), the table's.
  const auto help = ampt::config::help_text("ampt train", ampt::models::catalog());
  CHECK_THAT(help, Catch::Contains("--model " + fmt::format("{}", fmt::join(model_names(), "|"))));
  CHECK(model_names() == std::vector<std::string>{"mlp", "cnn", "gpt", "gpt-tiny", "gpt2-124m",
                                                  "gpt2-350m", "gpt2-774m", "gpt2-1558m", "llama",
                                                  "qwen2", "qwen3", "mistral", "qwen3-moe",
                                                  "mixtral", "llama-3.2-1b", "llama-3.1-8b",
                                                  "qwen2.5-0.5b", "qwen2.5-7b", "qwen3-0.6b",
                                                  "qwen3-1.7b", "qwen3-8b", "mistral-7b-v0.3",
                                                  "qwen3-30b-a3b", "mixtral-8x7b"});
}

TEST_CASE("model families: lookups by name, and the error naming every model", "[models][family]") {
  for (const auto& name : model_names()) {
    INFO(name);
    const auto* family = find_family(name);
    REQUIRE(family != nullptr);
    CHECK((family->name == name || std::ranges::find(family->presets, name) != family->presets.end()));
  }
  CHECK(find_family("gpt2-124m")->name == "gpt");
  CHECK(find_family("resnet") == nullptr);
  ampt::config::Config config;
  config.model = "resnet";
  CHECK_THROWS_WITH(family_of(config),
                    "unknown model 'resnet': expected one of mlp, cnn, gpt, gpt-tiny, gpt2-124m, "
                    "gpt2-350m, gpt2-774m, gpt2-1558m, llama, qwen2, qwen3, mistral, qwen3-moe, mixtral, llama-3.2-1b, llama-3.1-8b, qwen2.5-0.5b, qwen2.5-7b, qwen3-0.6b, qwen3-1.7b, qwen3-8b, mistral-7b-v0.3, qwen3-30b-a3b, mixtral-8x7b");
}

TEST_CASE("model families: what each family lets the rest of ampt do", "[models][family]") {
  const auto& mlp = *find_family("mlp");
  const auto& cnn = *find_family("cnn");
  const auto& gpt = *find_family("gpt");
  CHECK_FALSE((mlp.language_model || mlp.transformer_blocks || mlp.channels_last || mlp.pretrained ||
               mlp.hf_export || mlp.generation));
  CHECK(cnn.channels_last);
  CHECK_FALSE((cnn.language_model || cnn.transformer_blocks || cnn.pretrained));
  CHECK((gpt.language_model && gpt.transformer_blocks && gpt.pretrained && gpt.hf_export &&
         gpt.generation));
  CHECK_FALSE(gpt.channels_last);
  // Each family's own entry point is the table's: a request, a build and memory dimensions.
  for (const auto& family : model_families()) {
    INFO(family.name);
    CHECK(family.sample_request != nullptr);
    CHECK(family.build != nullptr);
    CHECK(family.memory_dims != nullptr);
    ampt::config::Config config;
    config.model = family.name;
    const auto request = family.sample_request(config);
    CHECK((request.form == ampt::data::SampleRequest::Form::tokens) == family.language_model);
    CHECK(family.memory_dims(config, {}, 0).name == family.name);
  }
}

TEST_CASE("model families: the kinds built of transformer blocks, from the table",
          "[models][family]") {
  // What zero_stage 3's refusal offers instead of an MLP or a CNN.
  CHECK(transformer_model_kinds() ==
        std::vector<std::string>{"gpt", "llama", "mistral", "mixtral", "qwen2", "qwen3",
                                 "qwen3-moe"});
}
