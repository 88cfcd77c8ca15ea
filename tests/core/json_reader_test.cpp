#include "ampt/core/json_reader.h"

#include <catch2/catch.hpp>

using ampt::JsonError;
using ampt::JsonValue;
using ampt::parse_json;

TEST_CASE("text: json reader reads objects, arrays, numbers and escaped strings", "[text]") {
  const JsonValue v = parse_json(
      R"( {"a": [1, -2.5e1, true, false, null], "s": "q\"\\\/\b\f\n\r\t\u0120\ud83d\ude00", "o": {}} )");
  REQUIRE(v.kind == JsonValue::Kind::object);
  const JsonValue* a = v.find("a");
  REQUIRE(a != nullptr);
  REQUIRE(a->items.size() == 5);
  CHECK(a->items[0].number == 1);
  CHECK(a->items[1].number == -25);
  CHECK(a->items[2].boolean);
  CHECK(a->items[4].kind == JsonValue::Kind::null);
  CHECK(v.find("s")->string == "q\"\\/\b\f\n\r\t\xC4\xA0\xF0\x9F\x98\x80");
  CHECK(v.find("o")->members.empty());
  CHECK(v.find("missing") == nullptr);
}

TEST_CASE("text: json reader names what is wrong and where", "[text]") {
  CHECK_THROWS_WITH(parse_json(R"({"a": [1, 2)"), Catch::Contains("unexpected end") && Catch::Contains("byte 11"));
  CHECK_THROWS_WITH(parse_json(R"({"a": "abc)"), Catch::Contains("in a string"));
  CHECK_THROWS_WITH(parse_json(R"({"a": 1} x)"), Catch::Contains("after the JSON value"));
  CHECK_THROWS_WITH(parse_json(R"({"a" 1})"), Catch::Contains("expected ':'"));
  CHECK_THROWS_WITH(parse_json(R"(["\ud800"])"), Catch::Contains("lone high surrogate"));
  CHECK_THROWS_WITH(parse_json(R"(["\x"])"), Catch::Contains("invalid escape"));
  CHECK_THROWS_WITH(parse_json(std::string(300, '[')), Catch::Contains("deeper than 256"));
  CHECK_THROWS_AS(parse_json("tru"), JsonError);
}
