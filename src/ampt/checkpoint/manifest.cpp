#include "ampt/checkpoint/manifest.h"

#include "ampt/checkpoint/checkpoint.h"
#include "ampt/core/errors.h"
#include "ampt/core/json_text.h"
#include "ampt/core/json_reader.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

namespace ampt::checkpoint {
namespace {

constexpr const char* kManifestFormat = "ampt-sharded-checkpoint";

std::string strings_json(const std::vector<std::string>& items) {
  std::vector<std::string> quoted;
  for (const auto& item : items) quoted.push_back(json_string(item));
  return fmt::format("[{}]", fmt::join(quoted, ", "));
}

std::string file_json(const ManifestFile& file) {
  std::vector<std::string> records;
  for (const auto& [name, crc] : file.records) records.push_back(fmt::format("{}: {}", json_string(name), crc));
  return fmt::format("{{\"file\": {}, \"crc32\": {{{}}}}}", json_string(file.file),
                     fmt::join(records, ", "));
}

// Reading side: every access checks the kind, so a damaged file gives a clear error.
class Fields {
 public:
  Fields(const JsonValue& object, const std::string& path) : object_(object), path_(path) {
    if (object.kind != JsonValue::Kind::object) throw bad("it is not a JSON object");
  }
  const JsonValue& get(std::string_view key) const {
    const JsonValue* value = object_.find(key);
    if (value == nullptr) throw bad(fmt::format("it lacks '{}'", key));
    return *value;
  }
  bool has(std::string_view key) const { return object_.find(key) != nullptr; }
  int64_t integer(std::string_view key) const { return integer_of(get(key), key); }
  std::string text(std::string_view key) const {
    const auto& v = get(key);
    if (v.kind != JsonValue::Kind::string) throw bad(fmt::format("'{}' is not a string", key));
    return v.string;
  }
  const std::vector<JsonValue>& array(std::string_view key) const {
    const auto& v = get(key);
    if (v.kind != JsonValue::Kind::array) throw bad(fmt::format("'{}' is not an array", key));
    return v.items;
  }
  std::vector<int64_t> integers(std::string_view key) const {
    std::vector<int64_t> out;
    for (const auto& item : array(key)) out.push_back(integer_of(item, key));
    return out;
  }
  std::vector<std::string> texts(std::string_view key) const {
    std::vector<std::string> out;
    for (const auto& item : array(key)) {
      if (item.kind != JsonValue::Kind::string) throw bad(fmt::format("'{}' holds a non-string", key));
      out.push_back(item.string);
    }
    return out;
  }
  RuntimeError bad(const std::string& why) const {
    return RuntimeError("checkpoint manifest '" + path_ + "' cannot be used: " + why);
  }

 private:
  int64_t integer_of(const JsonValue& v, std::string_view key) const {
    if (v.kind != JsonValue::Kind::number || v.number != std::floor(v.number) ||
        std::abs(v.number) > 9.0e15) {
      throw bad(fmt::format("'{}' is not an integer", key));
    }
    return static_cast<int64_t>(v.number);
  }

  const JsonValue& object_;
  const std::string& path_;
};

ManifestFile parse_file(const JsonValue& value, const std::string& path) {
  const Fields f(value, path);
  ManifestFile file{f.text("file"), {}};
  const Fields records(f.get("crc32"), path);
  for (const auto& [name, crc] : f.get("crc32").members) {
    if (crc.kind != JsonValue::Kind::number || crc.number < 0 || crc.number > 4294967295.0) {
      throw records.bad("the checksum of '" + name + "' is not a CRC-32");
    }
    file.records[name] = static_cast<uint32_t>(crc.number);
  }
  if (file.file.empty() || file.file.find('/') != std::string::npos) {
    throw f.bad("a file name '" + file.file + "' outside the checkpoint's directory");
  }
  return file;
}

}  // namespace

std::string manifest_json(const Manifest& m) {
  const auto& l = m.layout;
  std::string out = "{\n";
  out += fmt::format("  \"format\": {},\n  \"format_version\": {},\n  \"step\": {},\n"
                     "  \"world_size\": {},\n",
                     json_string(kManifestFormat), kFormatVersion, m.step, m.shards.size());
  out += "  \"parameters\": [\n";
  for (size_t i = 0; i < l.names.size(); ++i) {
    out += fmt::format("    {{\"name\": {}, \"shape\": [{}]}}{}\n", json_string(l.names[i]),
                       fmt::join(l.shapes[i], ", "), i + 1 < l.names.size() ? "," : "");
  }
  out += "  ],\n  \"units\": [\n";
  const auto& units = l.layout.units();
  for (size_t u = 0; u < units.size(); ++u) {
    out += fmt::format("    {{\"params\": [{}], \"numels\": [{}]}}{}\n",
                       fmt::join(units[u].params, ", "), fmt::join(units[u].numels, ", "),
                       u + 1 < units.size() ? "," : "");
  }
  out += fmt::format("  ],\n  \"per_element\": {},\n  \"per_piece\": {},\n",
                     strings_json(l.per_element), strings_json(l.per_piece));
  out += "  \"shards\": [\n";
  for (size_t r = 0; r < m.shards.size(); ++r) {
    out += fmt::format("    {}{}\n", file_json(m.shards[r]), r + 1 < m.shards.size() ? "," : "");
  }
  out += "  ]\n}\n";
  return out;
}

Manifest parse_manifest(std::string_view text, const std::string& path) {
  JsonValue root;
  try {
    root = parse_json(text);
  } catch (const JsonError& e) {
    throw RuntimeError("checkpoint manifest '" + path + "' is truncated or corrupt: " + e.what());
  }
  const Fields f(root, path);
  if (!f.has("format") || f.text("format") != kManifestFormat) {
    throw f.bad("it is not an ampt sharded checkpoint's manifest");
  }
  Manifest m;
  if (f.integer("format_version") > kFormatVersion) {
    throw RuntimeError(fmt::format("checkpoint manifest '{}' has format version {}, newer than the "
                                   "{} this ampt reads; use a newer ampt",
                                   path, f.integer("format_version"), kFormatVersion));
  }
  m.step = f.integer("step");
  const int64_t world_size = f.integer("world_size");
  auto& l = m.layout;
  for (const auto& item : f.array("parameters")) {
    const Fields p(item, path);
    l.names.push_back(p.text("name"));
    l.shapes.push_back(p.integers("shape"));
  }
  std::vector<FlatUnit> units;
  for (const auto& item : f.array("units")) {
    const Fields u(item, path);
    FlatUnit unit{u.integers("params"), u.integers("numels")};
    if (unit.params.empty() || unit.params.size() != unit.numels.size()) {
      throw u.bad("a unit's params and numels differ in length");
    }
    for (size_t k = 0; k < unit.params.size(); ++k) {
      const auto p = unit.params[k];
      if (p < 0 || p >= static_cast<int64_t>(l.shapes.size())) throw u.bad("a unit names no parameter");
      int64_t numel = 1;
      for (const auto d : l.shapes[p]) numel *= d;
      if (numel != unit.numels[k]) throw u.bad("'" + l.names[p] + "' has another size in its unit");
    }
    units.push_back(std::move(unit));
  }
  l.per_element = f.texts("per_element");
  l.per_piece = f.texts("per_piece");
  for (const auto& item : f.array("shards")) m.shards.push_back(parse_file(item, path));
  if (m.shards.empty() || world_size != static_cast<int64_t>(m.shards.size())) {
    throw f.bad(fmt::format("it lists {} shards for world size {}", m.shards.size(), world_size));
  }
  try {
    l.layout = FlatLayout(std::move(units), world_size);
  } catch (const std::invalid_argument& e) {
    throw f.bad(e.what());
  }
  return m;
}

}  // namespace ampt::checkpoint
