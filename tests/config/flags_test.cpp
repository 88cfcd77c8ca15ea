#include <catch2/catch.hpp>

#include "config_test_support.h"

using namespace ampt::config;
using namespace ampt::config::testing;

TEST_CASE("flags take `--name value` and `--name=value`", "[config][flags]") {
  Resolved resolved =
      resolve({"--batch_size", "8", "--lr=1e-3", "--mixed_precision=fp16", "--device", "cpu"}, {});
  CHECK(resolved.config().batch_size == 8);
  CHECK(resolved.config().lr == 1e-3);
  CHECK(resolved.config().mixed_precision == ampt::config::MixedPrecision::fp16);
  CHECK(resolved.config().device == ampt::config::DeviceKind::cpu);
  CHECK(describe(resolved.source_of("lr")) == "flag --lr");
  CHECK(describe(resolved.source_of("device")) == "flag --device");
}

TEST_CASE("a bare boolean flag means true, =value sets it explicitly", "[config][flags]") {
  CHECK(resolve({"--debug"}, {}).config().debug);
  CHECK(resolve({"--debug", "--batch_size", "4"}, {}).config().debug);
  CHECK_FALSE(resolve({"--debug=false"}, {}).config().debug);
  CHECK(resolve({"--debug=YES"}, {}).config().debug);
  CHECK_FALSE(resolve({"--debug=off"}, {{"AMPT_DEBUG", "1"}}).config().debug);
  CHECK(resolve_error({"--debug=maybe"}) ==
        "invalid value 'maybe' for debug (flag --debug): expected a boolean (true/false, yes/no, "
        "on/off, 1/0)");
  CHECK(resolve_error({"--debug", "false"}) ==
        "unexpected argument 'false' (write --debug=false to give a boolean flag a value)");
}

TEST_CASE("the last of repeated flags wins", "[config][flags]") {
  CHECK(resolve({"--batch_size", "8", "--batch_size=16"}, {}).config().batch_size == 16);
}

TEST_CASE("negative numbers are values, not flags", "[config][flags]") {
  CHECK(resolve_error({"--seed", "-1"}) ==
        "invalid value '-1' for seed (flag --seed): expected an integer >= 0");
}

TEST_CASE("unknown flags are rejected with a suggestion", "[config][flags]") {
  CHECK(resolve_error({"--bach_size", "8"}) ==
        "unknown flag '--bach_size' (did you mean '--batch_size'?)");
  CHECK(resolve_error({"--bach_size=8"}) ==
        "unknown flag '--bach_size' (did you mean '--batch_size'?)");
  CHECK(resolve_error({"--grad_scaler_int", "2"}) ==
        "unknown flag '--grad_scaler_int' (did you mean '--grad_scaler_init'?)");
  CHECK(resolve_error({"--frobnicate"}) == "unknown flag '--frobnicate'");
  CHECK(resolve_error({"-x"}) == "unknown flag '-x'");
}

TEST_CASE("positional arguments are rejected", "[config][flags]") {
  CHECK(resolve_error({"foo"}) == "unexpected argument 'foo'");
  CHECK(resolve_error({"--batch_size", "8", "extra"}) == "unexpected argument 'extra'");
  CHECK(resolve_error({"--", "--batch_size"}) == "unexpected argument '--batch_size'");
}

TEST_CASE("a flag without its value is reported as such", "[config][flags]") {
  CHECK(resolve_error({"--batch_size"}) == "flag --batch_size needs a value");
  CHECK(resolve_error({"--batch_size", "--lr", "0.1"}) == "flag --batch_size needs a value");
  CHECK(resolve_error({"--lr="}) == "invalid value '' for lr (flag --lr): expected a number > 0");
}

TEST_CASE("flag values get the same checks as every other source", "[config][flags]") {
  CHECK(resolve_error({"--batch_size", "12abc"}) ==
        "invalid value '12abc' for batch_size (flag --batch_size): expected an integer >= 1");
  CHECK(resolve_error({"--batch_size", "1.5"}) ==
        "invalid value '1.5' for batch_size (flag --batch_size): expected an integer >= 1");
  CHECK(resolve_error({"--max_steps", "99999999999999999999"}) ==
        "invalid value '99999999999999999999' for max_steps (flag --max_steps): expected an "
        "integer >= 0");
  CHECK(resolve_error({"--grad_scaler_backoff", "1"}) ==
        "invalid value '1' for grad_scaler_backoff (flag --grad_scaler_backoff): expected a number "
        "in (0, 1)");
  CHECK(resolve_error({"--grad_scaler_growth_factor=0.5"}) ==
        "invalid value '0.5' for grad_scaler_growth_factor (flag --grad_scaler_growth_factor): "
        "expected a number > 1");
  CHECK(resolve_error({"--adam_beta2", "1.0"}) ==
        "invalid value '1.0' for adam_beta2 (flag --adam_beta2): expected a number in [0, 1)");
  CHECK(resolve_error({"--min_lr_ratio", "-0.1"}) ==
        "invalid value '-0.1' for min_lr_ratio (flag --min_lr_ratio): expected a number in [0, 1]");
  CHECK(resolve_error({"--mixed_precision", "fp64"}) ==
        "invalid value 'fp64' for mixed_precision (flag --mixed_precision): expected one of no, "
        "fp16, bf16, auto, fp8");
  CHECK(resolve_error({"--device", "gpu"}) ==
        "invalid value 'gpu' for device (flag --device): expected one of auto, cpu, cuda");
  CHECK(resolve_error({"--output_dir="}) ==
        "invalid value '' for output_dir (flag --output_dir): expected a non-empty string");
  CHECK(resolve_error({"--model", "resnet"}) ==
        "invalid value 'resnet' for model (flag --model): expected one of mlp, cnn, gpt, "
        "gpt-tiny, gpt2-124m");  // the catalog's names (test_catalog())
}

TEST_CASE("help is detected before resolving and otherwise ignored", "[config][flags]") {
  CHECK(wants_help({"--help"}));
  CHECK(wants_help({"--batch_size", "8", "-h"}));
  CHECK_FALSE(wants_help({"--batch_size", "8"}));
  CHECK_FALSE(wants_help({"--", "--help"}));
  CHECK(resolve({"--help"}, {}).config().batch_size == ampt::config::Config{}.batch_size);
}

TEST_CASE("gemm_epilogues: on by default, off by flag or env, a bad value named",
          "[config][flags]") {
  CHECK(resolve({}, {}).config().gemm_epilogues);
  CHECK_FALSE(resolve({"--gemm_epilogues=false"}, {}).config().gemm_epilogues);
  CHECK_FALSE(resolve({}, {{"AMPT_GEMM_EPILOGUES", "0"}}).config().gemm_epilogues);
  CHECK(resolve_error({"--gemm_epilogues=fast"}) ==
        "invalid value 'fast' for gemm_epilogues (flag --gemm_epilogues): expected a boolean "
        "(true/false, yes/no, on/off, 1/0)");
}
