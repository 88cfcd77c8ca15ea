// --fp8_layers and --fp8_scaling rowwise: accepted forms from flags, env and YAML (a list), and
// every rejected form as one line naming the option and what it allows.
#include <catch2/catch.hpp>

#include "ampt/config/fp8_layers.h"
#include "config_test_support.h"

using namespace ampt::config;
using namespace ampt::config::testing;

TEST_CASE("fp8_layers: auto, all or patterns, from flags, env and YAML", "[config][fp8]") {
  CHECK(resolve({}, {}).config().fp8_layers == "auto");
  CHECK(resolve({"--fp8_layers", "all"}, {}).config().fp8_layers == "all");
  CHECK(resolve({"--fp8_layers", "h.*.mlp.*,head"}, {}).config().fp8_layers == "h.*.mlp.*,head");
  CHECK(resolve({}, {{"AMPT_FP8_LAYERS", "h.?.attn.c_attn"}}).config().fp8_layers ==
        "h.?.attn.c_attn");
  const TempYaml yaml("amp:\n  fp8_layers: ['h.*.mlp.c_fc', head]\n  fp8_scaling: rowwise\n");
  const auto from_yaml = resolve_yaml(yaml).config();
  CHECK(from_yaml.fp8_layers == "h.*.mlp.c_fc,head");
  CHECK(from_yaml.fp8_scaling == Fp8Scaling::rowwise);
}

TEST_CASE("fp8_layers: bad values are one-line usage errors", "[config][fp8]") {
  CHECK(fp8_layers_problem("auto").empty());
  CHECK(resolve_error({"--fp8_layers", "h.0.mlp,auto"}) ==
        "invalid value 'h.0.mlp,auto' for fp8_layers (flag --fp8_layers): auto stands alone, not "
        "among patterns; expected " + std::string(kFp8LayersExpected));
  CHECK(resolve_error({"--fp8_layers", "h[0]"}) ==
        "invalid value 'h[0]' for fp8_layers (flag --fp8_layers): pattern 'h[0]' is not valid; "
        "expected " + std::string(kFp8LayersExpected));
  CHECK_THAT(resolve_error({"--fp8_layers", ""}), Catch::Contains("it is empty; expected auto, all"));
  CHECK_THAT(resolve_error({"--fp8_scaling", "columnwise"}),
             Catch::Contains("expected one of delayed, current, rowwise"));
}
