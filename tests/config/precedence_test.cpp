#include <catch2/catch.hpp>

#include "config_test_support.h"
#include "support/process.h"

using namespace ampt::config;
using namespace ampt::config::testing;

namespace {

const char* const kFile =
    "training:\n"
    "  batch_size: 16\n"
    "  lr: 0.01\n"
    "run:\n"
    "  seed: 3\n";

}  // namespace

TEST_CASE("with no input every setting is its default", "[config][precedence]") {
  Resolved resolved = resolve({}, {{"HOME", "/root"}, {"PATH", "/bin"}});
  CHECK(resolved.config().batch_size == Config{}.batch_size);
  CHECK(resolved.config().mixed_precision == Config{}.mixed_precision);
  CHECK(resolved.config().config_file.empty());
  CHECK(describe(resolved.source_of("batch_size")) == "default");
  CHECK(describe(resolved.source_of("config")) == "default");
}

TEST_CASE("a file overrides defaults", "[config][precedence]") {
  TempYaml yaml(kFile);
  Resolved resolved = resolve_yaml(yaml);
  CHECK(resolved.config().batch_size == 16);
  CHECK(resolved.config().lr == 0.01);
  CHECK(resolved.config().seed == 3);
  CHECK(resolved.config().epochs == Config{}.epochs);
  CHECK(describe(resolved.source_of("batch_size")) == yaml.at(2));
  CHECK(describe(resolved.source_of("lr")) == yaml.at(3));
  CHECK(describe(resolved.source_of("seed")) == yaml.at(5));
  CHECK(describe(resolved.source_of("epochs")) == "default");
  CHECK(resolved.config().config_file == yaml.path());
  CHECK(describe(resolved.source_of("config")) == "flag --config");
}

TEST_CASE("env overrides the file", "[config][precedence]") {
  TempYaml yaml(kFile);
  Resolved resolved = resolve_yaml(yaml, {}, {{"AMPT_BATCH_SIZE", "32"}});
  CHECK(resolved.config().batch_size == 32);
  CHECK(describe(resolved.source_of("batch_size")) == "env AMPT_BATCH_SIZE");
  CHECK(resolved.config().lr == 0.01);
  CHECK(describe(resolved.source_of("lr")) == yaml.at(3));
}

TEST_CASE("flags override env and the file", "[config][precedence]") {
  TempYaml yaml(kFile);
  Resolved resolved =
      resolve_yaml(yaml, {"--batch_size", "8"}, {{"AMPT_BATCH_SIZE", "32"}, {"AMPT_LR", "0.5"}});
  CHECK(resolved.config().batch_size == 8);
  CHECK(describe(resolved.source_of("batch_size")) == "flag --batch_size");
  CHECK(resolved.config().lr == 0.5);
  CHECK(describe(resolved.source_of("lr")) == "env AMPT_LR");
  CHECK(resolved.config().seed == 3);
  CHECK(describe(resolved.source_of("seed")) == yaml.at(5));
}

TEST_CASE("the config file comes from --config, else AMPT_CONFIG", "[config][precedence]") {
  TempYaml from_env("training: {batch_size: 5}\n");
  TempYaml from_flag("training: {batch_size: 7}\n");

  Resolved env_only = resolve({}, {{"AMPT_CONFIG", from_env.path()}});
  CHECK(env_only.config().batch_size == 5);
  CHECK(env_only.config().config_file == from_env.path());
  CHECK(describe(env_only.source_of("config")) == "env AMPT_CONFIG");
  CHECK(describe(env_only.source_of("batch_size")) == from_env.at(1));

  Resolved both = resolve({"--config", from_flag.path()}, {{"AMPT_CONFIG", from_env.path()}});
  CHECK(both.config().batch_size == 7);
  CHECK(both.config().config_file == from_flag.path());
  CHECK(describe(both.source_of("config")) == "flag --config");
}

TEST_CASE("a missing config file is a usage error with the OS reason", "[config][precedence]") {
  CHECK(resolve_error({"--config", "/nonexistent/x.yaml"}) ==
        "cannot read config file '/nonexistent/x.yaml': No such file or directory");
  CHECK(resolve_error({}, {{"AMPT_CONFIG", "/nonexistent/y.yaml"}}) ==
        "cannot read config file '/nonexistent/y.yaml': No such file or directory");
  std::string directory = std::filesystem::temp_directory_path().string();
  CHECK(resolve_error({"--config", directory}) ==
        "cannot read config file '" + directory + "': Is a directory");
}

TEST_CASE("values are validated at every level, naming their source", "[config][precedence]") {
  CHECK(resolve_error({"--batch_size", "abc"}) ==
        "invalid value 'abc' for batch_size (flag --batch_size): expected an integer >= 1");
  CHECK(resolve_error({}, {{"AMPT_BATCH_SIZE", "0"}}) ==
        "invalid value '0' for batch_size (env AMPT_BATCH_SIZE): expected an integer >= 1");
  CHECK(yaml_error("amp:\n  mixed_precision: fp64\n") ==
        "invalid value 'fp64' for mixed_precision (FILE:2): expected one of no, fp16, bf16, auto, fp8");
  // An invalid value is an error even when a higher-precedence source would override it.
  TempYaml yaml("training: {lr: -1}\n");
  CHECK(usage_error([&] {
          resolve_yaml(yaml, {"--lr", "0.1"});
        }) == "invalid value '-1' for lr (" + yaml.at(1) + "): expected a number > 0");
}

TEST_CASE("init_from makes the model the catalog's for its files unless --model names one, and the hub cache follows huggingface_hub",
          "[config][init_from]") {
  // config reads no file: the catalog (models::catalog() in ampt) answers for init_from.
  std::vector<std::pair<std::string, std::string>> asked;
  auto catalog = test_catalog();
  catalog.pretrained_model = [&](const std::string& init_from, const std::string& cache) {
    asked.emplace_back(init_from, cache);
    return std::string("gpt-tiny");
  };
  const auto with = [&](const std::vector<std::string>& args, const Env& env = {}) {
    return ampt::config::resolve(args, env, catalog).config();
  };
  CHECK(with({"--init_from", "some/model"}, {{"HF_HUB_CACHE", "/c"}}).model == "gpt-tiny");
  CHECK(asked == std::vector<std::pair<std::string, std::string>>{{"some/model", "/c"}});
  CHECK(with({"--init_from", "some/model", "--model", "gpt"}).model == "gpt");
  CHECK(asked.size() == 1);  // --model named: the files are not asked
  CHECK(with({}).model == "mlp");
  CHECK(resolve({}, {{"HOME", "/h"}}).config().hf_hub_cache == "/h/.cache/huggingface/hub");
  CHECK(resolve({}, {{"HOME", "/h"}, {"HF_HOME", "/hf"}}).config().hf_hub_cache == "/hf/hub");
  CHECK(resolve({}, {{"HOME", "/h"}, {"HF_HOME", "/hf"}, {"HF_HUB_CACHE", "/c"}})
            .config()
            .hf_hub_cache == "/c");
  CHECK(resolve({}, {}).config().hf_hub_cache.empty());
}
