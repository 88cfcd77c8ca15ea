// Other tools' names for the scaler and autocast settings, as flags and YAML keys.
#include <catch2/catch.hpp>

#include "ampt/config/source.h"
#include "config_test_support.h"

using namespace ampt::config;
using namespace ampt::config::testing;

TEST_CASE("aliases: DeepSpeed's flag names set the canonical scaler options", "[config][aliases]") {
  const auto r = resolve({"--loss_scale_window", "1000", "--initial_scale_power", "12",
                          "--scaler_enabled=false"},
                         {});
  CHECK(r.config().grad_scaler_growth_interval == 1000);
  CHECK(r.config().grad_scaler_init == 4096.0);
  CHECK_FALSE(r.config().grad_scaler_enabled);
  CHECK(describe(r.source_of("grad_scaler_growth_interval")) == "flag --loss_scale_window");
  CHECK(describe(r.source_of("grad_scaler_init")) == "flag --initial_scale_power");
  // A bare switch alias means true, as the canonical switch does.
  CHECK(resolve({"--scaler_enabled"}, {}).config().grad_scaler_enabled);
}

TEST_CASE("aliases: bad alias values and double spellings are usage errors", "[config][aliases]") {
  CHECK(resolve_error({"--initial_scale_power", "200"}) ==
        "invalid value '200' for initial_scale_power (flag --initial_scale_power): expected an "
        "integer in [0, 127] (init_scale = 2^power)");
  CHECK(resolve_error({"--loss_scale_window", "0"}) ==
        "invalid value '0' for grad_scaler_growth_interval (flag --loss_scale_window): expected "
        "an integer >= 1");
  CHECK(resolve_error({"--grad_scaler_init", "8", "--initial_scale_power", "3"}) ==
        "flag --grad_scaler_init and --initial_scale_power both set grad_scaler_init; give one "
        "of them");
  CHECK_THAT(resolve_error({"--loss_scale_windo", "3"}),
             Catch::Contains("did you mean '--loss_scale_window'?"));
}

TEST_CASE("aliases: a DeepSpeed fp16 block pasted under scaler: resolves", "[config][aliases]") {
  TempYaml yaml(
      "scaler:\n"
      "  loss_scale: 0\n"
      "  initial_scale_power: 16\n"
      "  loss_scale_window: 1000\n"
      "  rules: deepspeed\n"
      "  hysteresis: 2\n"
      "  consecutive_hysteresis: true\n"
      "  min_loss_scale: 1\n"
      "  max_loss_scale: 16777216\n"
      "  enabled: true\n");
  const auto r = resolve_yaml(yaml);
  const Config& c = r.config();
  CHECK(c.loss_scale == 0.0);
  CHECK(c.grad_scaler_init == 65536.0);
  CHECK(c.grad_scaler_growth_interval == 1000);
  CHECK(c.grad_scaler_rules == ScalerRules::deepspeed);
  CHECK(c.hysteresis == 2);
  CHECK(c.consecutive_hysteresis);
  CHECK(c.min_loss_scale == 1.0);
  CHECK(c.max_loss_scale == 16777216.0);
  CHECK(describe(r.source_of("grad_scaler_init")) == yaml.at(3));
}

TEST_CASE("aliases: torch.autocast's enabled and dtype inside amp:", "[config][aliases]") {
  TempYaml bf16("amp:\n  enabled: true\n  dtype: bfloat16\n");
  CHECK(resolve_yaml(bf16).config().mixed_precision == MixedPrecision::bf16);
  TempYaml off("amp:\n  enabled: false\n  dtype: float16\n");
  CHECK(resolve_yaml(off).config().mixed_precision == MixedPrecision::no);
  TempYaml scaler_off("scaler_enabled: false\n");
  CHECK_FALSE(resolve_yaml(scaler_off).config().grad_scaler_enabled);
}

TEST_CASE("aliases: two spellings of one setting in a file must agree", "[config][aliases]") {
  CHECK(yaml_error("scaler:\n  init_scale: 1024\n  initial_scale_power: 16\n") ==
        "conflicting values for grad_scaler_init: 'init_scale: 1024' at FILE:2 means 1024, but "
        "'initial_scale_power: 16' at FILE:3 means 65536");
  CHECK(yaml_error("scaler:\n  initial_scale_power: -1\n") ==
        "invalid value '-1' for initial_scale_power (FILE:2): expected an integer in [0, 127] "
        "(init_scale = 2^power)");
  CHECK(yaml_error("amp:\n  use_amp: false\n  enabled: true\n") ==
        "conflicting values for use_amp: 'use_amp: false' at FILE:2 means false, but 'enabled: "
        "true' at FILE:3 means true");
  CHECK_THAT(yaml_error("training:\n  loss_scale_window: 10\n"),
             Catch::Contains("belongs in section 'scaler'"));
}

TEST_CASE("aliases: allreduce_dtype, ampt's old name of reduce_dtype, everywhere", "[config][aliases]") {
  const auto flag = resolve({"--allreduce_dtype", "bf16"}, {});
  CHECK(flag.config().reduce_dtype == ReduceDtype::bf16);
  CHECK(describe(flag.source_of("reduce_dtype")) == "flag --allreduce_dtype");
  const auto env = resolve({}, {{"AMPT_ALLREDUCE_DTYPE", "fp32"}});
  CHECK(env.config().reduce_dtype == ReduceDtype::fp32);
  CHECK(describe(env.source_of("reduce_dtype")) == "env AMPT_ALLREDUCE_DTYPE");
  TempYaml yaml("dist:\n  allreduce_dtype: bf16\n");
  CHECK(resolve_yaml(yaml).config().reduce_dtype == ReduceDtype::bf16);
  CHECK(resolve_error({}, {{"AMPT_ALLREDUCE_DTYPE", "fp32"}, {"AMPT_REDUCE_DTYPE", "bf16"}}) ==
        "AMPT_ALLREDUCE_DTYPE and AMPT_REDUCE_DTYPE both set reduce_dtype; give one of them");
  CHECK(resolve_error({"--allreduce_dtype", "fp8"}) ==
        "invalid value 'fp8' for reduce_dtype (flag --allreduce_dtype): expected one of grad, "
        "fp32, bf16");
}

TEST_CASE("aliases: DeepSpeed's zero_optimization.stage sets zero_stage", "[config][aliases]") {
  TempYaml yaml("zero_optimization:\n  stage: 2\n");
  const auto r = resolve_yaml(yaml);
  CHECK(r.config().zero_stage == 2);
  CHECK(describe(r.source_of("zero_stage")) == yaml.at(2));
  // Only inside its section: a bare `stage` is no setting, and no flag.
  CHECK(yaml_error("stage: 2\n") ==
        "key 'stage' in FILE:1 belongs in section 'zero_optimization'");
  CHECK_THAT(resolve_error({"--stage", "2"}), Catch::StartsWith("unknown flag '--stage'"));
  CHECK(yaml_error("zero_optimization:\n  stage: 4\n") ==
        "invalid value '4' for zero_stage (FILE:2): expected an integer in [0, 3]");
  CHECK_THAT(yaml_error("zero_optimization:\n  stage: 2\ndist:\n  zero_stage: 1\n"),
             Catch::StartsWith("conflicting values for zero_stage"));
}
