#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <set>

#include "ampt/config/options.h"

using namespace ampt::config;

TEST_CASE("no option name, YAML path or env name is defined twice", "[config][table]") {
  std::set<std::string> names, yaml_paths, envs;
  for (const Option& option : options()) {
    INFO(option.name);
    CHECK(names.insert(option.name).second);
    CHECK(envs.insert(option.env).second);
    if (!option.section.empty()) CHECK(yaml_paths.insert(option.yaml_path()).second);
  }
  CHECK(names.size() == options().size());
}

TEST_CASE("env names are AMPT_ plus the upper-case option name", "[config][table]") {
  for (const Option& option : options()) {
    std::string expected = "AMPT_" + option.name;
    std::ranges::transform(expected, expected.begin(),
                           [](unsigned char c) { return std::toupper(c); });
    CHECK(option.env == expected);
  }
  CHECK(find_option("batch_size")->env == "AMPT_BATCH_SIZE");
  CHECK(find_option("grad_scaler_init")->env == "AMPT_GRAD_SCALER_INIT");
}

TEST_CASE("every default satisfies its own constraint and prints back to itself",
          "[config][table]") {
  const Config defaults;
  for (const Option& option : options()) {
    INFO(option.name);
    const std::string text = option.format(defaults);
    Config reparsed;
    reparsed.batch_size = 999;  // the store must write the option's own member, not reset others
    CHECK(option.store(reparsed, text));
    CHECK(option.format(reparsed) == text);
    if (option.name != "batch_size") CHECK(reparsed.batch_size == 999);
  }
}

TEST_CASE("every option has help, a value hint and an expected-value description",
          "[config][table]") {
  for (const Option& option : options()) {
    INFO(option.name);
    CHECK_FALSE(option.help.empty());
    CHECK_FALSE(option.value_hint.empty());
    CHECK_FALSE(option.expected.empty());
    CHECK(option.help.find('\n') == std::string::npos);
  }
}

TEST_CASE("the table holds the specified YAML paths and sections", "[config][table]") {
  CHECK(sections() ==
        std::vector<std::string>{"run", "checkpoint", "amp", "perf", "scaler", "training",
                                 "preference", "grpo", "distill", "model", "lora", "data", "dist"});
  CHECK(find_option("config")->yaml_path().empty());
  CHECK(find_option("model")->yaml_path() == "model.name");
  CHECK(find_option("dataset")->yaml_path() == "data.dataset");
  CHECK(find_option("device")->yaml_path() == "run.device");
  CHECK(find_option("amp_opt_level")->yaml_path() == "amp.opt_level");
  CHECK(find_option("grad_scaler_init")->yaml_path() == "scaler.init_scale");
  CHECK(find_option("grad_scaler_growth_factor")->yaml_path() == "scaler.growth_factor");
  CHECK(find_option("grad_scaler_backoff")->yaml_path() == "scaler.backoff_factor");
  CHECK(find_option("grad_scaler_growth_interval")->yaml_path() == "scaler.growth_interval");
  CHECK(find_option("adam_eps")->yaml_path() == "training.adam_eps");
  CHECK(find_option("objective")->yaml_path() == "training.objective");
  CHECK(find_option("orpo_lambda")->yaml_path() == "preference.orpo_lambda");
  CHECK(find_option("num_generations")->yaml_path() == "grpo.num_generations");
  CHECK(find_option("mlp_hidden")->yaml_path() == "model.mlp_hidden");
  CHECK(find_option("lora_targets")->yaml_path() == "lora.target_modules");
  CHECK(find_option("dist_backend")->yaml_path() == "dist.backend");
  CHECK(find_option("reduce_dtype")->yaml_path() == "dist.reduce_dtype");
  CHECK(find_option("zero_stage")->yaml_path() == "dist.zero_stage");
  CHECK(find_option("synthetic_classes")->yaml_path() == "data.synthetic_classes");
  CHECK(find_option("no_such_option") == nullptr);
}

TEST_CASE("constraints reject the values just outside their range", "[config][table]") {
  auto accepts = [](std::string_view name, std::string_view text) {
    Config config;
    return find_option(name)->store(config, text);
  };
  CHECK(accepts("seed", "0"));
  CHECK_FALSE(accepts("seed", "-1"));
  CHECK_FALSE(accepts("log_every", "0"));
  CHECK_FALSE(accepts("grad_scaler_init", "0"));
  CHECK_FALSE(accepts("grad_scaler_growth_factor", "1"));
  CHECK(accepts("grad_scaler_growth_factor", "1.0001"));
  CHECK_FALSE(accepts("grad_scaler_backoff", "0"));
  CHECK_FALSE(accepts("grad_scaler_backoff", "1"));
  CHECK(accepts("max_steps", "0"));
  CHECK_FALSE(accepts("epochs", "0"));
  CHECK(accepts("min_lr_ratio", "0"));
  CHECK(accepts("min_lr_ratio", "1"));
  CHECK_FALSE(accepts("min_lr_ratio", "1.5"));
  CHECK(accepts("momentum", "0"));
  CHECK_FALSE(accepts("momentum", "1"));
  CHECK_FALSE(accepts("adam_beta2", "1"));
  CHECK_FALSE(accepts("adam_eps", "0"));
  CHECK(accepts("max_grad_norm", "0"));
  CHECK_FALSE(accepts("weight_decay", "-0.1"));
  CHECK_FALSE(accepts("synthetic_classes", "1"));
  CHECK(accepts("synthetic_classes", "2"));
  CHECK_FALSE(accepts("output_dir", ""));
  // A model's name is the catalog's to check, once the layers are applied (flags_test.cpp).
  CHECK(accepts("model", "resnet"));
  CHECK_FALSE(accepts("dataset", "mnist"));
}

TEST_CASE("enum options parse and print their spellings", "[config][table]") {
  Config config;
  REQUIRE(find_option("device")->store(config, "auto"));
  CHECK(config.device == DeviceKind::auto_select);
  REQUIRE(find_option("device")->store(config, "cuda"));
  CHECK(config.device == DeviceKind::cuda);
  CHECK_FALSE(find_option("device")->store(config, "auto_select"));
  CHECK_FALSE(find_option("mixed_precision")->store(config, "BF16"));  // case-sensitive
  REQUIRE(find_option("mixed_precision")->store(config, "fp16"));
  CHECK(config.mixed_precision == MixedPrecision::fp16);
  REQUIRE(find_option("optimizer")->store(config, "sgd"));
  CHECK(config.optimizer == OptimizerKind::sgd);
  REQUIRE(find_option("amp_opt_level")->store(config, "O0"));
  CHECK(config.amp_opt_level == OptLevel::O0);
  CHECK(format_value(config, "amp_opt_level") == "O0");
  CHECK(format_value(config, "device") == "cuda");
  CHECK(to_string(MixedPrecision::no) == "no");
}

TEST_CASE("format_value prints settings by name", "[config][table]") {
  Config config;
  config.lr = 1e-3;
  config.batch_size = 8;
  config.debug = true;
  CHECK(format_value(config, "lr") == "0.001");
  CHECK(format_value(config, "batch_size") == "8");
  CHECK(format_value(config, "debug") == "true");
  CHECK(format_value(Config{}, "grad_scaler_init") == "65536");
  CHECK_THROWS_AS(format_value(config, "nope"), std::invalid_argument);
}
