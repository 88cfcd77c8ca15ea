// JSON scalars for the files ampt writes by hand (metrics.jsonl, compare.json, safetensors headers).
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

namespace ampt {

// JSON has no NaN or infinity: a diverged value is written as null.
inline std::string json_number(double value) {
  return std::isfinite(value) ? fmt::format("{}", value) : "null";
}

// A number that a typed reader takes for a float only (transformers' strict config fields):
// json_number with ".0" after a whole value.
inline std::string json_float(double value) {
  auto text = json_number(value);
  if (std::isfinite(value) && text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

// An integer that may be absent (a config.json's bos_token_id): null when it is.
inline std::string json_optional_int(const std::optional<int64_t>& value) {
  return value ? std::to_string(*value) : "null";
}

// A quoted JSON string: quotes and backslashes escaped, control characters as \u00XX.
inline std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", c);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace ampt
