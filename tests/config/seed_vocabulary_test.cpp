// The seeds' own config words: SEDD's autocast flags and gradient_clip, NeMo-RL's policy:
// section, Onyx's mixed_precision_config and target_effective_batch_size, each resolved to
// ampt's option with its source, and each seed's file running a short job as written.
#include <catch2/catch.hpp>

#include "ampt/config/source.h"
#include "config_test_support.h"
#include "support/process.h"

using namespace ampt::config;
using namespace ampt::config::testing;

namespace {

// `ampt train` on the config file as the seed writes it, a few steps of the MLP on the CPU.
void runs_short_job(const TempYaml& yaml, std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"train", "--config", yaml.path(), "--max_steps", "3",
                                "--device", "cpu", "--batch_size", "16",
                                "--output_dir", ampt::test::make_temp_dir()};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = ampt::test::run_ampt(args);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("3/3 |"));
}

}  // namespace

TEST_CASE("seed words: SEDD's --use_amp and --amp_dtype flags are torch.autocast's pair",
          "[config][aliases][seeds]") {
  const auto both = resolve({"--use_amp", "--amp_dtype", "bfloat16"});
  CHECK(both.config().mixed_precision == MixedPrecision::bf16);
  CHECK(describe(both.source_of("mixed_precision")) == "flag --amp_dtype");
  const auto alone = resolve({"--use_amp"});
  CHECK(alone.config().mixed_precision == MixedPrecision::fp16);
  CHECK(describe(alone.source_of("mixed_precision")) == "flag --use_amp");
  CHECK(resolve({"--amp_dtype", "float16"}).config().mixed_precision == MixedPrecision::fp16);
  const auto off = resolve({"--use_amp=false", "--amp_dtype", "bfloat16"});
  CHECK(off.config().mixed_precision == MixedPrecision::no);
  CHECK(describe(off.source_of("mixed_precision")) == "flag --use_amp");
  const auto env = resolve({}, {{"AMPT_AMP_DTYPE", "bfloat16"}});
  CHECK(env.config().mixed_precision == MixedPrecision::bf16);
  CHECK(describe(env.source_of("mixed_precision")) == "env AMPT_AMP_DTYPE");

  CHECK(resolve_error({"--amp_dtype", "float64"}) ==
        "invalid value 'float64' for amp_dtype (flag --amp_dtype): expected one of bfloat16, "
        "float16, bf16, fp16");
  CHECK(resolve_error({"--use_amp=maybe"}) ==
        "invalid value 'maybe' for use_amp (flag --use_amp): expected a boolean (true/false, "
        "yes/no, on/off, 1/0)");
  CHECK(resolve_error({"--mixed_precision", "bf16", "--amp_dtype", "float16"}) ==
        "flag --mixed_precision and --amp_dtype both set mixed_precision; give one of them");
  CHECK(resolve_error({}, {{"AMPT_USE_AMP", "1"}, {"AMPT_MIXED_PRECISION", "bf16"}}) ==
        "AMPT_USE_AMP and AMPT_MIXED_PRECISION both set mixed_precision; give one of them");
  CHECK_THAT(resolve_error({"--use_ampp"}), Catch::Contains("did you mean '--use_amp'?"));
}

TEST_CASE("seed words: SEDD's gradient_clip is max_grad_norm", "[config][aliases][seeds]") {
  TempYaml yaml(
      "training:\n"
      "  use_amp: true\n"
      "  amp_dtype: bfloat16\n"
      "  gradient_clip: 0.5\n");
  const auto r = resolve_yaml(yaml);
  CHECK(r.config().max_grad_norm == 0.5);
  CHECK(describe(r.source_of("max_grad_norm")) == yaml.at(4));
  CHECK(r.config().mixed_precision == MixedPrecision::bf16);
  CHECK(describe(r.source_of("mixed_precision")) == yaml.at(3));
  CHECK(resolve({"--gradient_clip", "2"}).config().max_grad_norm == 2.0);
  CHECK(resolve_error({"--gradient_clip", "2", "--max_grad_norm", "1"}) ==
        "flag --max_grad_norm and --gradient_clip both set max_grad_norm; give one of them");
  CHECK(yaml_error("gradient_clip: 0.5\ntraining:\n  max_grad_norm: 1.0\n") ==
        "conflicting values for max_grad_norm: 'gradient_clip: 0.5' at FILE:1 means 0.5, but "
        "'max_grad_norm: 1.0' at FILE:3 means 1");
  runs_short_job(yaml);
}

TEST_CASE("seed words: NeMo-RL's policy: precision and max_grad_norm", "[config][aliases][seeds]") {
  TempYaml yaml(
      "policy:\n"
      "  precision: \"bfloat16\"\n"
      "  max_grad_norm: 0.25\n");
  const auto r = resolve_yaml(yaml);
  CHECK(r.config().mixed_precision == MixedPrecision::bf16);
  CHECK(describe(r.source_of("mixed_precision")) == yaml.at(2));
  CHECK(r.config().max_grad_norm == 0.25);
  CHECK(describe(r.source_of("max_grad_norm")) == yaml.at(3));
  TempYaml fp32("policy:\n  precision: \"float32\"\n");
  CHECK(resolve_yaml(fp32).config().mixed_precision == MixedPrecision::no);
  CHECK(yaml_error("policy:\n  precision: \"float8\"\n") ==
        "invalid value 'float8' for precision (FILE:2): expected one of float32, float16, "
        "bfloat16, fp32, fp16, bf16, 32, 32-true, 16, 16-mixed, bf16-mixed");
  CHECK_THAT(yaml_error("policy:\n  train_global_batch_size: 512\n"),
             Catch::StartsWith("unknown key 'train_global_batch_size' in FILE:2"));
  CHECK(yaml_error("policy:\n  precision: \"bfloat16\"\namp:\n  mixed_precision: fp16\n") ==
        "conflicting values for mixed_precision: 'precision: bfloat16' at FILE:2 means bf16, "
        "but 'mixed_precision: fp16' at FILE:4 means fp16");
  runs_short_job(yaml);
}

TEST_CASE("seed words: Onyx's mixed_precision_config and target_effective_batch_size",
          "[config][aliases][seeds]") {
  TempYaml yaml(
      "target_effective_batch_size: 64\n"
      "mixed_precision_config:\n"
      "  enabled: true\n"
      "  dtype: float16\n"
      "  init_scale: 1024\n"
      "  growth_factor: 4.0\n"
      "  backoff_factor: 0.25\n"
      "  growth_interval: 100\n"
      "  hysteresis: 2\n"
      "  min_loss_scale: 1.0\n"
      "  max_loss_scale: 65536.0\n"
      "  cache_enabled: false\n"
      "  scaler_enabled: true\n");
  const auto r = resolve_yaml(yaml, {"--batch_size", "16", "--grad_scaler_rules", "deepspeed"});
  const Config& c = r.config();
  CHECK(c.mixed_precision == MixedPrecision::fp16);
  CHECK(describe(r.source_of("mixed_precision")) == yaml.at(4));
  CHECK(c.grad_scaler_init == 1024.0);
  CHECK(c.grad_scaler_growth_factor == 4.0);
  CHECK(c.grad_scaler_backoff == 0.25);
  CHECK(c.grad_scaler_growth_interval == 100);
  CHECK(c.hysteresis == 2);
  CHECK(c.min_loss_scale == 1.0);
  CHECK(c.max_loss_scale == 65536.0);
  CHECK_FALSE(c.autocast_cache);
  CHECK(c.grad_scaler_enabled);
  CHECK(describe(r.source_of("autocast_cache")) == yaml.at(12));
  // 64 samples a step over 1 rank of 16: 4 micro-batches, set where the target was.
  CHECK(c.grad_accum_steps == 4);
  CHECK(describe(r.source_of("grad_accum_steps")) == yaml.at(1));

  const auto ranks = resolve({"--target_effective_batch_size", "64", "--batch_size", "8"},
                             {{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"MASTER_ADDR", "localhost"},
                              {"MASTER_PORT", "29500"}});
  CHECK(ranks.config().grad_accum_steps == 4);
  CHECK(resolve_error({"--target_effective_batch_size", "100", "--batch_size", "16"}) ==
        "target_effective_batch_size 100 (flag --target_effective_batch_size) is not a multiple "
        "of batch_size 16 x 1 rank = 16");
  CHECK(resolve_error({"--target_effective_batch_size", "64", "--grad_accum_steps", "2"}) ==
        "target_effective_batch_size (flag --target_effective_batch_size) and grad_accum_steps "
        "(flag --grad_accum_steps) both set the accumulation; give one of them");
  CHECK(yaml_error("mixed_precision_config:\n  init_scale: 1024\nscaler:\n  init_scale: 2048\n") ==
        "conflicting values for grad_scaler_init: 'init_scale: 1024' at FILE:2 means 1024, but "
        "'init_scale: 2048' at FILE:4 means 2048");
  CHECK_THAT(yaml_error("mixed_precision_config:\n  loss_scaling: 8\n"),
             Catch::StartsWith("unknown key 'loss_scaling' in FILE:2"));
  runs_short_job(yaml, {"--grad_scaler_rules", "deepspeed"});
}
