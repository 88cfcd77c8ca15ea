#include <catch2/catch.hpp>

#include "config_test_support.h"

using namespace ampt::config;
using namespace ampt::config::testing;

TEST_CASE("AMPT_ variables set their option, others are ignored", "[config][env]") {
  Resolved resolved = resolve({}, {{"AMPT_MIXED_PRECISION", "no"},
                                   {"AMPT_GRAD_SCALER_INIT", "1024"},
                                   {"AMPT_DEBUG", "on"},
                                   {"AMPTX", "1"},
                                   {"BATCH_SIZE", "junk"}});
  CHECK(resolved.config().mixed_precision == MixedPrecision::no);
  CHECK(resolved.config().grad_scaler_init == 1024.0);
  CHECK(resolved.config().debug);
  CHECK(describe(resolved.source_of("grad_scaler_init")) == "env AMPT_GRAD_SCALER_INIT");
}

TEST_CASE("unknown AMPT_ variables are errors with a suggestion", "[config][env]") {
  CHECK(resolve_error({}, {{"AMPT_BATCHSIZE", "8"}}) ==
        "unknown environment variable AMPT_BATCHSIZE (did you mean AMPT_BATCH_SIZE?)");
  CHECK(resolve_error({}, {{"AMPT_TOTALLY_UNRELATED_THING", "1"}}) ==
        "unknown environment variable AMPT_TOTALLY_UNRELATED_THING");
}

TEST_CASE("env values are validated", "[config][env]") {
  CHECK(resolve_error({}, {{"AMPT_DEBUG", "maybe"}}) ==
        "invalid value 'maybe' for debug (env AMPT_DEBUG): expected a boolean (true/false, yes/no, "
        "on/off, 1/0)");
  CHECK(resolve_error({}, {{"AMPT_LR", ""}}) ==
        "invalid value '' for lr (env AMPT_LR): expected a number > 0");
  CHECK(resolve_error({}, {{"AMPT_OPTIMIZER", "adam"}}) ==
        "invalid value 'adam' for optimizer (env AMPT_OPTIMIZER): expected one of adamw, sgd");
}
