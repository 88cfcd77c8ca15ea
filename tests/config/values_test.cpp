#include "ampt/config/values.h"

#include <catch2/catch.hpp>

using namespace ampt::config;

TEST_CASE("integers must be whole decimal numbers in int64 range", "[config][values]") {
  CHECK(parse_int("0") == 0);
  CHECK(parse_int("-7") == -7);
  CHECK(parse_int("9223372036854775807") == INT64_MAX);
  CHECK_FALSE(parse_int("9223372036854775808"));  // overflow
  CHECK_FALSE(parse_int("12abc"));
  CHECK_FALSE(parse_int("1.5"));
  CHECK_FALSE(parse_int("1e3"));
  CHECK_FALSE(parse_int(""));
  CHECK_FALSE(parse_int(" 3"));
}

TEST_CASE("floats accept decimal and scientific notation but not inf or nan", "[config][values]") {
  CHECK(parse_float("1e-3") == 1e-3);
  CHECK(parse_float("65536") == 65536.0);
  CHECK(parse_float("0.25") == 0.25);
  CHECK(parse_float("-2.5E2") == -250.0);
  CHECK_FALSE(parse_float("inf"));
  CHECK_FALSE(parse_float("nan"));
  CHECK_FALSE(parse_float("1e999"));  // out of double range
  CHECK_FALSE(parse_float("0.1x"));
  CHECK_FALSE(parse_float("2**16"));
  CHECK_FALSE(parse_float(""));
}

TEST_CASE("booleans accept the usual spellings in any case", "[config][values]") {
  for (auto text : {"true", "TRUE", "True", "1", "yes", "Yes", "on", "ON"}) {
    INFO(text);
    CHECK(parse_bool(text) == true);
  }
  for (auto text : {"false", "False", "0", "no", "NO", "off", "Off"}) {
    INFO(text);
    CHECK(parse_bool(text) == false);
  }
  CHECK_FALSE(parse_bool("2"));
  CHECK_FALSE(parse_bool("y"));
  CHECK_FALSE(parse_bool(""));
}

TEST_CASE("ranges check and describe their bounds", "[config][values]") {
  auto open_unit = Range::interval(0, false, 1, false);
  CHECK(open_unit.text() == "in (0, 1)");
  CHECK_FALSE(open_unit.contains(0));
  CHECK(open_unit.contains(0.5));
  CHECK_FALSE(open_unit.contains(1));
  CHECK(Range::interval(0, true, 1, false).text() == "in [0, 1)");
  CHECK(Range::at_least(1).text() == ">= 1");
  CHECK(Range::at_least(1).contains(1));
  CHECK(Range::above(0).text() == "> 0");
  CHECK_FALSE(Range::above(0).contains(0));
  CHECK(Range{}.text().empty());
}

TEST_CASE("sources describe themselves for messages", "[config][values]") {
  CHECK(describe(Source{}) == "default");
  CHECK(describe(Source{Source::Kind::file, "configs/a.yaml:7"}) == "configs/a.yaml:7");
  CHECK(describe(Source{Source::Kind::env, "AMPT_BATCH_SIZE"}) == "env AMPT_BATCH_SIZE");
  CHECK(describe(Source{Source::Kind::flag, "--batch_size"}) == "flag --batch_size");
  CHECK(
      std::string(invalid_value("lr", "x", {Source::Kind::flag, "--lr"}, "a number > 0").what()) ==
      "invalid value 'x' for lr (flag --lr): expected a number > 0");
}
