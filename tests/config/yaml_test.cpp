#include <catch2/catch.hpp>

#include "config_test_support.h"

using namespace ampt::config;
using namespace ampt::config::testing;

namespace {

Config load(std::string_view contents) {
  TempYaml yaml(contents);
  return resolve_yaml(yaml).config();
}

MixedPrecision precision_of(std::string_view contents) { return load(contents).mixed_precision; }

}  // namespace

TEST_CASE("an empty file or empty sections set nothing", "[config][yaml]") {
  CHECK(load("").batch_size == Config{}.batch_size);
  CHECK(load("# only a comment\n").batch_size == Config{}.batch_size);
  CHECK(load("training:\n").batch_size == Config{}.batch_size);
}

TEST_CASE("every section reads its keys", "[config][yaml]") {
  Config config = load(
      "run: {seed: 3, device: cpu, output_dir: out/x, log_every: 5, debug: yes}\n"
      "amp: {mixed_precision: fp16, opt_level: O0}\n"
      "scaler: {init_scale: 1024, growth_interval: 10, backoff_factor: 0.25, growth_factor: 4}\n"
      "training: {batch_size: 8, lr: 0.01, optimizer: sgd, adam_eps: 1e-6, max_steps: 100}\n"
      "model: {name: mlp, mlp_hidden: 64, mlp_layers: 2}\n"
      "data: {dataset: synthetic, synthetic_samples: 512, synthetic_features: 8, "
      "synthetic_classes: 3}\n");
  CHECK(config.seed == 3);
  CHECK(config.device == DeviceKind::cpu);
  CHECK(config.output_dir == "out/x");
  CHECK(config.log_every == 5);
  CHECK(config.debug);
  CHECK(config.mixed_precision == MixedPrecision::fp16);
  CHECK(config.amp_opt_level == OptLevel::O0);
  CHECK(config.grad_scaler_init == 1024.0);
  CHECK(config.grad_scaler_growth_interval == 10);
  CHECK(config.grad_scaler_backoff == 0.25);
  CHECK(config.grad_scaler_growth_factor == 4.0);
  CHECK(config.batch_size == 8);
  CHECK(config.lr == 0.01);
  CHECK(config.optimizer == OptimizerKind::sgd);
  CHECK(config.adam_eps == 1e-6);
  CHECK(config.max_steps == 100);
  CHECK(config.model == "mlp");
  CHECK(config.mlp_hidden == 64);
  CHECK(config.mlp_layers == 2);
  CHECK(config.dataset == "synthetic");
  CHECK(config.synthetic_samples == 512);
  CHECK(config.synthetic_features == 8);
  CHECK(config.synthetic_classes == 3);
}

TEST_CASE("canonical names work flat at the top level and inside their own section",
          "[config][yaml]") {
  TempYaml yaml(
      "batch_size: 8\n"
      "grad_scaler_init: 512\n"
      "model: mlp\n"
      "scaler:\n"
      "  grad_scaler_backoff: 0.125\n"
      "amp:\n"
      "  amp_opt_level: O0\n");
  Resolved resolved = resolve_yaml(yaml);
  CHECK(resolved.config().batch_size == 8);
  CHECK(resolved.config().grad_scaler_init == 512.0);
  CHECK(resolved.config().model == "mlp");
  CHECK(resolved.config().grad_scaler_backoff == 0.125);
  CHECK(resolved.config().amp_opt_level == OptLevel::O0);
  CHECK(describe(resolved.source_of("grad_scaler_init")) == yaml.at(2));
  CHECK(describe(resolved.source_of("grad_scaler_backoff")) == yaml.at(5));
  CHECK(describe(resolved.source_of("amp_opt_level")) == yaml.at(7));
}

TEST_CASE("the same setting twice with the same value is fine", "[config][yaml]") {
  TempYaml yaml("batch_size: 8\ntraining: {batch_size: 8}\n");
  Resolved resolved = resolve_yaml(yaml);
  CHECK(resolved.config().batch_size == 8);
  CHECK(describe(resolved.source_of("batch_size")) == yaml.at(1));
}

TEST_CASE("use_amp and amp_dtype map onto mixed_precision", "[config][yaml][alias]") {
  CHECK(precision_of("use_amp: false\n") == MixedPrecision::no);
  CHECK(precision_of("use_amp: true\n") == MixedPrecision::fp16);  // torch.autocast's CUDA default
  CHECK(precision_of("use_amp: true\namp_dtype: bfloat16\n") == MixedPrecision::bf16);
  CHECK(precision_of("use_amp: true\namp_dtype: float16\n") == MixedPrecision::fp16);
  CHECK(precision_of("amp_dtype: bf16\n") == MixedPrecision::bf16);  // dtype alone enables AMP
  CHECK(precision_of("amp_dtype: fp16\n") == MixedPrecision::fp16);
  CHECK(precision_of("use_amp: false\namp_dtype: bfloat16\n") == MixedPrecision::no);
  CHECK(precision_of("amp: {use_amp: true, amp_dtype: bfloat16}\n") == MixedPrecision::bf16);
  CHECK(precision_of("training: {use_amp: false}\n") == MixedPrecision::no);
  CHECK(precision_of("use_amp: true\namp: {amp_dtype: bf16}\n") == MixedPrecision::bf16);
}

TEST_CASE("the alias's line is the source of mixed_precision", "[config][yaml][alias]") {
  TempYaml dtype("run: {seed: 1}\nuse_amp: true\namp_dtype: bfloat16\n");
  CHECK(describe(resolve_yaml(dtype).source_of("mixed_precision")) == dtype.at(3));
  TempYaml use_amp("run: {seed: 1}\nuse_amp: off\n");
  CHECK(describe(resolve_yaml(use_amp).source_of("mixed_precision")) == use_amp.at(2));
  TempYaml precision("training:\n  precision: bf16-mixed\n");
  CHECK(describe(resolve_yaml(precision).source_of("mixed_precision")) == precision.at(2));
}

TEST_CASE("precision accepts torch, short and Lightning spellings", "[config][yaml][alias]") {
  const std::vector<std::pair<std::string, MixedPrecision>> cases{
      {"float32", MixedPrecision::no},      {"bfloat16", MixedPrecision::bf16},
      {"float16", MixedPrecision::fp16},    {"fp32", MixedPrecision::no},
      {"bf16", MixedPrecision::bf16},       {"fp16", MixedPrecision::fp16},
      {"32", MixedPrecision::no},           {"16-mixed", MixedPrecision::fp16},
      {"bf16-mixed", MixedPrecision::bf16}, {"\"32\"", MixedPrecision::no}};
  for (const auto& [spelling, expected] : cases) {
    INFO(spelling);
    CHECK(precision_of("precision: " + spelling + "\n") == expected);
    CHECK(precision_of("amp:\n  precision: " + spelling + "\n") == expected);
  }
}

TEST_CASE("env and flags override YAML aliases", "[config][yaml][alias]") {
  TempYaml yaml("precision: float16\n");
  CHECK(resolve_yaml(yaml, {}, {{"AMPT_MIXED_PRECISION", "bf16"}}).config().mixed_precision ==
        MixedPrecision::bf16);
  CHECK(resolve_yaml(yaml, {"--mixed_precision", "no"}).config().mixed_precision ==
        MixedPrecision::no);
}

TEST_CASE("conflicting values in one file name both lines", "[config][yaml][errors]") {
  CHECK(yaml_error("precision: float16\namp:\n  mixed_precision: bf16\n") ==
        "conflicting values for mixed_precision: 'precision: float16' at FILE:1 means fp16, "
        "but 'mixed_precision: bf16' at FILE:3 means bf16");
  CHECK(yaml_error("use_amp: false\nprecision: bf16\n") ==
        "conflicting values for mixed_precision: 'precision: bf16' at FILE:2 means bf16, "
        "but 'use_amp: false' at FILE:1 means no");
  CHECK(yaml_error("batch_size: 8\ntraining:\n  batch_size: 16\n") ==
        "conflicting values for batch_size: 'batch_size: 8' at FILE:1 means 8, "
        "but 'batch_size: 16' at FILE:3 means 16");
  CHECK(yaml_error("use_amp: true\namp: {use_amp: false}\n") ==
        "conflicting values for use_amp: 'use_amp: true' at FILE:1 means true, "
        "but 'use_amp: false' at FILE:2 means false");
}

TEST_CASE("bad alias values list what is allowed", "[config][yaml][errors]") {
  CHECK(
      yaml_error("precision: float64\n") ==
      "invalid value 'float64' for precision (FILE:1): expected one of float32, float16, bfloat16, "
      "fp32, fp16, bf16, 32, 32-true, 16, 16-mixed, bf16-mixed");
  CHECK(
      yaml_error("amp:\n  amp_dtype: half\n") ==
      "invalid value 'half' for amp_dtype (FILE:2): expected one of bfloat16, float16, bf16, fp16");
  CHECK(yaml_error("use_amp: sometimes\n") ==
        "invalid value 'sometimes' for use_amp (FILE:1): expected a boolean (true/false, yes/no, "
        "on/off, 1/0)");
  CHECK(yaml_error("scaler:\n  use_amp: true\n") ==
        "key 'use_amp' in FILE:2 belongs in section 'amp', not 'scaler'");
}

TEST_CASE("unknown keys get a suggestion", "[config][yaml][errors]") {
  CHECK(yaml_error("run: {seed: 1}\n\ntrainig:\n  batch_size: 8\n") ==
        "unknown key 'trainig' in FILE:3 (did you mean 'training'?)");
  CHECK(yaml_error("training:\n  batch_sise: 8\n") ==
        "unknown key 'batch_sise' in FILE:2 (did you mean 'batch_size'?)");
  CHECK(yaml_error("scaler:\n  init_scal: 8\n") ==
        "unknown key 'init_scal' in FILE:2 (did you mean 'init_scale'?)");
  CHECK(yaml_error("use_ampp: true\n") ==
        "unknown key 'use_ampp' in FILE:1 (did you mean 'use_amp'?)");
  CHECK(yaml_error("wandb_project: x\n") == "unknown key 'wandb_project' in FILE:1");
}

TEST_CASE("known keys in the wrong section say where they belong", "[config][yaml][errors]") {
  CHECK(yaml_error("amp:\n  mixed_precision: bf16\n\n\n  batch_size: 8\n") ==
        "key 'batch_size' in FILE:5 belongs in section 'training', not 'amp'");
  CHECK(yaml_error("training:\n  init_scale: 2\n") ==
        "key 'init_scale' in FILE:2 belongs in section 'scaler', not 'training'");
  CHECK(yaml_error("init_scale: 2\n") == "key 'init_scale' in FILE:1 belongs in section 'scaler'");
  CHECK(yaml_error("config: other.yaml\n") ==
        "key 'config' in FILE:1: a config file cannot name another; use --config or AMPT_CONFIG");
}

TEST_CASE("structure errors name file and line", "[config][yaml][errors]") {
  CHECK(yaml_error("- batch_size\n- 8\n") ==
        "expected a map of settings at the top level of FILE:1, not a sequence");
  CHECK(yaml_error("training: 8\n") ==
        "section 'training' in FILE:1 must be a map of settings, not a scalar");
  CHECK(yaml_error("run:\n  seed: [1, 2]\n") ==
        "invalid value for seed (FILE:2): expected an integer >= 0, not a sequence");
  CHECK(yaml_error("training:\n  lr: {value: 1}\n") ==
        "invalid value for lr (FILE:2): expected a number > 0, not a map");
  CHECK(yaml_error("training:\n  lr:\n") ==
        "invalid value '' for lr (FILE:2): expected a number > 0");
  CHECK(yaml_error("? [a, b]\n: 1\n") == "invalid key in FILE:1: expected a name, not a sequence");
}

TEST_CASE("YAML values get the same checks as flags", "[config][yaml][errors]") {
  CHECK(yaml_error("training:\n  batch_size: 12abc\n") ==
        "invalid value '12abc' for batch_size (FILE:2): expected an integer >= 1");
  CHECK(yaml_error("training:\n  epochs: 99999999999999999999\n") ==
        "invalid value '99999999999999999999' for epochs (FILE:2): expected an integer >= 1");
  CHECK(yaml_error("scaler: {backoff_factor: 1.5}\n") ==
        "invalid value '1.5' for grad_scaler_backoff (FILE:1): expected a number in (0, 1)");
  CHECK(yaml_error("run:\n  debug: perhaps\n") ==
        "invalid value 'perhaps' for debug (FILE:2): expected a boolean (true/false, yes/no, "
        "on/off, 1/0)");
  CHECK(yaml_error("data: {synthetic_classes: 1}\n") ==
        "invalid value '1' for synthetic_classes (FILE:1): expected an integer >= 2");
}

TEST_CASE("malformed YAML reports yaml-cpp's message at a 1-based line and column",
          "[config][yaml][errors]") {
  std::string message = yaml_error("training:\n  batch_size: 8\n lr: [1, 2\n");
  CHECK_THAT(message, Catch::StartsWith("malformed YAML in FILE:"));
  CHECK(yaml_error("a: b: c\n") == "malformed YAML in FILE:1:5: illegal map value");
  CHECK(yaml_error("training:\n  lr: [0.1\n") ==
        "malformed YAML in FILE:3:1: end of sequence flow not found");
}
