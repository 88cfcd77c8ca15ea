// The catalog config resolves against: --init_from's config.json makes the model its family's,
// and --init_from naming a peft adapter makes its base and LoRA settings the run's; settings
// that disagree and adapters ampt does not train are one line each.
#include "ampt/models/catalog.h"

#include "ampt/models/model_family.h"
#include "ampt/config/resolve.h"
#include "ampt/core/errors.h"
#include "support/process.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <map>

using namespace ampt::config;

namespace {

// An adapter directory whose adapter_config.json holds `fields` (JSON members) after the usual
// ones, and a base directory (a Llama's config.json) it names.
struct Adapter {
  std::string base;
  std::string dir;
};

Adapter make_adapter(const std::string& fields = "", bool name_base = true) {
  const auto root = ampt::test::make_temp_dir();
  Adapter a{root + "/base", root + "/adapter"};
  std::filesystem::create_directories(a.base);
  std::filesystem::create_directories(a.dir);
  ampt::test::write_file(a.base + "/config.json", R"({"model_type": "llama"})");
  ampt::test::write_file(
      a.dir + "/adapter_config.json",
      "{\"peft_type\": \"LORA\", \"r\": 8, \"lora_alpha\": 16, \"lora_dropout\": 0.05, "
      "\"target_modules\": [\"q_proj\", \"v_proj\"], \"bias\": \"none\", \"use_dora\": false" +
          std::string(name_base ? ", \"base_model_name_or_path\": \"" + a.base + "\"" : "") +
          fields + "}");
  return a;
}

Resolved resolve(const std::vector<std::string>& flags, const std::map<std::string, std::string>& env) {
  return ampt::config::resolve(flags, env, ampt::models::catalog());
}

Config resolved(const std::vector<std::string>& flags) { return resolve(flags, {}).config(); }

}  // namespace

TEST_CASE("peft adapter: --init_from ADAPTER takes its base and its LoRA settings", "[models][catalog][lora]") {
  const auto a = make_adapter();
  const auto config = resolved({"--init_from", a.dir});
  CHECK(config.init_from == a.base);
  CHECK(config.init_adapter == a.dir);
  CHECK(config.model == "llama");  // from the base's config.json
  CHECK(config.lora_rank == 8);
  CHECK(config.lora_alpha == 16.0);
  CHECK(config.lora_dropout == 0.05);
  CHECK(config.lora_targets == "q_proj,v_proj");
  // Recorded as the file's settings: a checkpoint's configuration carries them.
  CHECK(describe(resolve({"--init_from", a.dir}, {}).source_of("lora_rank")) ==
        a.dir + "/adapter_config.json");

  SECTION("BASE,ADAPTER names the base, whatever the file says") {
    const auto other = make_adapter("", /*name_base=*/false);
    const auto named = resolved({"--init_from", a.base + "," + other.dir});
    CHECK(named.init_from == a.base);
    CHECK(named.init_adapter == other.dir);
  }
  SECTION("a flag that agrees is fine; dropout may change") {
    const auto same = resolved({"--init_from", a.dir, "--lora_rank", "8", "--lora_dropout", "0"});
    CHECK(same.lora_rank == 8);
    CHECK(same.lora_dropout == 0.0);
  }
}

TEST_CASE("peft adapter: disagreeing settings and adapters ampt does not train are one line",
          "[models][catalog][lora]") {
  const auto a = make_adapter();
  CHECK_THROWS_WITH(resolved({"--init_from", a.dir, "--lora_rank", "4"}),
                    "lora_rank 4 (flag --lora_rank) differs from the adapter's r 8 in " + a.dir +
                        "/adapter_config.json: leave it out");
  CHECK_THROWS_WITH(resolved({"--init_from", make_adapter("", false).dir}),
                    Catch::Contains("adapter_config.json names no base_model_name_or_path: give "
                                    "the base as --init_from BASE,"));
  for (const auto& [fields, message] : std::vector<std::pair<std::string, std::string>>{
           {", \"use_rslora\": true", "use_rslora is set: ampt trains plain LoRA adapters only"},
           {", \"modules_to_save\": [\"lm_head\"]", "modules_to_save is set"},
           {", \"rank_pattern\": {\"q_proj\": 4}", "rank_pattern is set"},
       }) {
    INFO(fields);
    CHECK_THROWS_WITH(resolved({"--init_from", make_adapter(fields).dir}), Catch::Contains(message));
  }
  const auto bad_type = make_adapter();
  ampt::test::write_file(bad_type.dir + "/adapter_config.json",
                         R"({"peft_type": "IA3", "r": 8, "lora_alpha": 8, "target_modules": ["q"]})");
  CHECK_THROWS_WITH(resolved({"--init_from", bad_type.dir}),
                    Catch::EndsWith("adapter_config.json: peft_type is 'IA3': ampt trains LORA "
                                    "adapters only"));
  ampt::test::write_file(bad_type.dir + "/adapter_config.json",
                         R"({"peft_type": "LORA", "r": "8", "lora_alpha": 8, "target_modules": ["q"]})");
  CHECK_THROWS_WITH(resolved({"--init_from", bad_type.dir}),
                    Catch::EndsWith("adapter_config.json: r is a string, not a number"));
}

TEST_CASE("catalog: init_from makes the model its config.json's family unless --model names one",
          "[models][catalog]") {
  // Not found (yet): taken for a GPT-2, whose loading then names what was searched.
  CHECK(resolve({"--init_from", "gpt2"}, {}).config().model == "gpt");
  const auto dir = ampt::test::make_temp_dir();
  for (const auto& [model_type, model] : std::vector<std::pair<std::string, std::string>>{
           {"llama", "llama"}, {"qwen2", "qwen2"}, {"qwen3", "qwen3"}, {"mistral", "mistral"},
           {"qwen3_moe", "qwen3-moe"}, {"mixtral", "mixtral"}, {"gpt2", "gpt"}}) {
    ampt::test::write_file(dir + "/config.json", "{\"model_type\": \"" + model_type + "\"}");
    CHECK(resolve({"--init_from", dir}, {}).config().model == model);
  }
  // GPT-2's files before 2020 had no model_type.
  ampt::test::write_file(dir + "/config.json", "{\"n_embd\": 768}");
  CHECK(resolve({"--init_from", dir}, {}).config().model == "gpt");
  ampt::test::write_file(dir + "/config.json", "{\"model_type\": \"mamba\"}");
  CHECK_THROWS_WITH(resolve({"--init_from", dir}, {}),
                    dir + "/config.json: model_type is mamba; ampt loads gpt2, llama, mistral, "
                          "mixtral, qwen2, qwen3 and qwen3_moe models");
  CHECK(resolve({"--init_from", dir, "--model", "gpt"}, {}).config().model == "gpt");
  CHECK(resolve({"--init_from", "gpt2", "--model", "gpt2-124m"}, {}).config().model == "gpt2-124m");
  CHECK(ampt::models::catalog().models == ampt::models::model_names());
}
