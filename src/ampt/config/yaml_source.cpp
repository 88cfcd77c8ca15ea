#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>

#include "ampt/config/aliases.h"
#include "ampt/config/options.h"
#include "ampt/config/readers.h"
#include "ampt/config/suggest.h"

namespace ampt::config {

namespace {

// Keys users bring from torch.autocast / Hugging Face / Lightning configs; all of them set
// mixed_precision. Accepted at the top level and in these sections.
constexpr std::array<std::string_view, 3> kAliasKeys{"use_amp", "amp_dtype", "precision"};
constexpr std::array<std::string_view, 2> kAliasSections{"amp", "training"};
// Sections whose enabled and dtype are torch.autocast's arguments: ampt's amp: and Onyx's.
constexpr std::array<std::string_view, 2> kAutocastSections{"amp", "mixed_precision_config"};

bool is_alias(std::string_view key) {
  return std::ranges::find(kAliasKeys, key) != kAliasKeys.end();
}

bool alias_allowed_in(std::string_view section) {
  return section.empty() || std::ranges::find(kAliasSections, section) != kAliasSections.end();
}

bool is_autocast_section(std::string_view section) {
  return std::ranges::find(kAutocastSections, section) != kAutocastSections.end();
}

// torch.autocast's own argument names inside `amp:` and Onyx's `mixed_precision_config:`
// (enabled, dtype) mean use_amp and amp_dtype.
std::optional<std::string_view> autocast_alias(std::string_view key, std::string_view section) {
  if (is_alias(key) && alias_allowed_in(section)) return key;
  if (is_autocast_section(section) && key == "enabled") return kAliasKeys[0];
  if (is_autocast_section(section) && key == "dtype") return kAliasKeys[1];
  return std::nullopt;
}

// The option table's sections, and those only aliases live in (DeepSpeed's zero_optimization).
bool is_section(std::string_view key) {
  return std::ranges::find(sections(), key) != sections().end() ||
         std::ranges::find(alias_only_sections(), key) != alias_only_sections().end();
}

// The option a key names inside `section` ("" = top level, where only canonical names count).
const Option* option_for(std::string_view key, std::string_view section) {
  for (const Option& option : options()) {
    if (option.section.empty()) continue;
    if (section.empty() ? option.name == key
                        : option.section == section && (option.key == key || option.name == key)) {
      return &option;
    }
  }
  return nullptr;
}

// The section a known key belongs in, for "belongs in section ..." messages.
// An option's own section comes first: init_scale belongs in scaler, though Onyx's
// mixed_precision_config has an alias of that name too.
std::optional<std::string> home_section(std::string_view key) {
  if (is_alias(key)) return std::string(kAliasSections.front());
  for (const Option& option : options()) {
    if (!option.section.empty() && (option.key == key || option.name == key)) return option.section;
  }
  for (const Alias& alias : aliases()) {
    if (alias.name == key) return alias.sections.front();
  }
  return std::nullopt;
}

std::vector<std::string> keys_allowed_in(std::string_view section) {
  std::vector<std::string> keys;
  if (section.empty()) {
    keys = sections();
    keys.insert(keys.end(), alias_only_sections().begin(), alias_only_sections().end());
  }
  for (const Option& option : options()) {
    if (option.section.empty()) continue;
    if (section.empty()) {
      keys.push_back(option.name);
    } else if (option.section == section) {
      keys.push_back(option.key);
      keys.push_back(option.name);
    }
  }
  if (alias_allowed_in(section)) keys.insert(keys.end(), kAliasKeys.begin(), kAliasKeys.end());
  if (is_autocast_section(section)) keys.insert(keys.end(), {"enabled", "dtype"});
  for (const Alias& alias : aliases()) {
    if (find_alias(alias.name, section)) keys.push_back(alias.name);
  }
  return keys;
}

std::string_view kind_of(const YAML::Node& node) {
  return node.IsMap() ? "map" : node.IsSequence() ? "sequence" : "scalar";
}

std::string read_text(const std::string& path) {
  auto cannot_read = [&path] {
    return UsageError(fmt::format("cannot read config file '{}': {}", path, std::strerror(errno)));
  };
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                       &std::fclose);
  if (!file) throw cannot_read();
  std::string text;
  char buffer[4096];
  while (std::size_t n = std::fread(buffer, 1, sizeof buffer, file.get())) text.append(buffer, n);
  if (std::ferror(file.get())) throw cannot_read();  // e.g. EISDIR: fopen accepts directories
  return text;
}

YAML::Node parse_yaml(const std::string& path) {
  std::string text = read_text(path);
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& error) {
    if (error.mark.is_null())
      throw UsageError(fmt::format("malformed YAML in {}: {}", path, error.msg));
    throw UsageError(fmt::format("malformed YAML in {}:{}:{}: {}", path, error.mark.line + 1,
                                 error.mark.column + 1, error.msg));
  }
}

// Walks one file. Values are validated as they are read so errors point at their line, and every
// setting is remembered so that two lines giving it different values are reported, not raced.
class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {}

  std::vector<Assignment> read(const YAML::Node& root) {
    if (!root.IsNull() && !root.IsMap()) {
      throw UsageError(fmt::format("expected a map of settings at the top level of {}, not a {}",
                                   where(root), kind_of(root)));
    }
    read_map(root, "");
    resolve_use_amp();
    return std::move(assignments_);
  }

 private:
  // A value read from the file, with where and how it was written (for conflict messages).
  template <class T>
  struct Located {
    T value;
    Source source;
    std::string origin;  // "precision: float16", as written
  };
  using Seen = Located<std::string>;  // a setting's normalized value, e.g. "fp16"

  Source at(const YAML::Node& node) const {
    return {Source::Kind::file, fmt::format("{}:{}", path_, node.Mark().line + 1)};
  }
  std::string where(const YAML::Node& node) const { return describe(at(node)); }

  void read_map(const YAML::Node& map, const std::string& section) {
    for (const auto& entry : map) {
      const YAML::Node& key_node = entry.first;
      const YAML::Node& value = entry.second;
      if (!key_node.IsScalar()) {
        throw UsageError(fmt::format("invalid key in {}: expected a name, not a {}",
                                     where(key_node), kind_of(key_node)));
      }
      const std::string& key = key_node.Scalar();
      // `model:` is both a section and the flat name of the model option; a map means section.
      if (section.empty() && is_section(key) && (value.IsMap() || !option_for(key, section))) {
        if (!value.IsMap() && !value.IsNull()) {
          throw UsageError(fmt::format("section '{}' in {} must be a map of settings, not a {}",
                                       key, where(key_node), kind_of(value)));
        }
        read_map(value, key);
      } else if (const Option* option = option_for(key, section)) {
        read_option(*option, key_node, value);
      } else if (auto autocast_key = autocast_alias(key, section)) {
        read_alias(std::string(*autocast_key), key_node, value);
      } else if (const Alias* alias = find_alias(key, section)) {
        read_option_alias(*alias, key_node, value);
      } else {
        throw bad_key(key_node, section);
      }
    }
  }

  UsageError bad_key(const YAML::Node& key_node, const std::string& section) const {
    const std::string& key = key_node.Scalar();
    if (key == "config") {
      return UsageError(fmt::format(
          "key 'config' in {}: a config file cannot name another; use --config or AMPT_CONFIG",
          where(key_node)));
    }
    if (auto home = home_section(key)) {
      return UsageError(fmt::format("key '{}' in {} belongs in section '{}'{}", key,
                                    where(key_node), *home,
                                    section.empty() ? "" : fmt::format(", not '{}'", section)));
    }
    auto suggestion = closest(key, keys_allowed_in(section));
    return UsageError(
        fmt::format("unknown key '{}' in {}{}", key, where(key_node),
                    suggestion ? fmt::format(" (did you mean '{}'?)", *suggestion) : ""));
  }

  std::string scalar(const YAML::Node& key_node, const YAML::Node& value,
                     std::string_view expected) const {
    if (value.IsScalar()) return value.Scalar();
    if (value.IsNull()) return "";  // `lr:` with nothing after it is rejected as an empty value
    throw UsageError(fmt::format("invalid value for {} ({}): expected {}, not a {}",
                                 key_node.Scalar(), where(key_node), expected, kind_of(value)));
  }

  void read_option(const Option& option, const YAML::Node& key_node, const YAML::Node& value) {
    std::string text = option.yaml_list && value.IsSequence() ? list_text(key_node, value)
                                                              : scalar(key_node, value, option.expected);
    Source source = at(key_node);
    option.set(scratch_, text, source);
    add(option, option.format(scratch_), source, fmt::format("{}: {}", key_node.Scalar(), text));
  }

  // initial_scale_power: 16 sets init_scale to 65536, as DeepSpeed reads it.
  void read_option_alias(const Alias& alias, const YAML::Node& key_node, const YAML::Node& value) {
    std::string text =
        scalar(key_node, value, alias.translate ? alias.expected : find_option(alias.target)->expected);
    const Assignment assignment = alias_assignment(alias, text, at(key_node));
    assignment.option->set(scratch_, assignment.text, assignment.source);
    add(*assignment.option, assignment.option->format(scratch_), assignment.source,
        fmt::format("{}: {}", key_node.Scalar(), text));
  }

  // A YAML list as the flag form: items joined by ','; a map item is a schedule stage,
  // {until_step: 500, precision: fp32} → "fp32:500", {until_epoch: 2, ...} → "fp32:2ep".
  std::string list_text(const YAML::Node& key_node, const YAML::Node& list) const {
    std::string text;
    for (const auto& item : list) {
      if (!text.empty()) text += ',';
      if (item.IsScalar()) {
        text += item.Scalar();
      } else if (item.IsMap()) {
        text += stage_text(key_node, item);
      } else {
        throw UsageError(fmt::format("invalid item in {} ({}): expected a scalar or a map, not a {}",
                                     key_node.Scalar(), where(item), kind_of(item)));
      }
    }
    return text;
  }

  std::string stage_text(const YAML::Node& key_node, const YAML::Node& stage) const {
    std::string precision, bound;
    for (const auto& entry : stage) {
      const auto key = entry.first.Scalar();
      const auto value = scalar(entry.first, entry.second, "a scalar");
      if (key == "precision") {
        precision = value;
      } else if (key == "until_step") {
        bound = ":" + value;
      } else if (key == "until_epoch") {
        bound = ":" + value + "ep";
      } else {
        throw UsageError(fmt::format(
            "unknown key '{}' in a stage of {} ({}): expected until_step or until_epoch, and "
            "precision",
            key, key_node.Scalar(), where(entry.first)));
      }
    }
    if (precision.empty()) {
      throw UsageError(fmt::format("a stage of {} ({}) has no precision", key_node.Scalar(),
                                   where(stage)));
    }
    return precision + bound;
  }

  template <class E, std::size_t N>
  Located<E> read_spelling(const YAML::Node& key_node, const YAML::Node& value,
                              const Spellings<E, N>& table) const {
    std::string expected = "one of " + join_spellings(table);
    std::string text = scalar(key_node, value, expected);
    auto parsed = find_spelling(table, text);
    if (!parsed) throw invalid_value(key_node.Scalar(), text, at(key_node), expected);
    return {*parsed, at(key_node), fmt::format("{}: {}", key_node.Scalar(), text)};
  }

  Located<bool> read_bool(const YAML::Node& key_node, const YAML::Node& value) const {
    std::string text = scalar(key_node, value, kBooleanExpected);
    auto parsed = parse_bool(text);
    if (!parsed) throw invalid_value(key_node.Scalar(), text, at(key_node), kBooleanExpected);
    return {*parsed, at(key_node), fmt::format("{}: {}", key_node.Scalar(), text)};
  }

  // use_amp and amp_dtype only take effect together, after the whole file is read.
  void read_alias(const std::string& key, const YAML::Node& key_node, const YAML::Node& value) {
    if (key == "precision") {
      auto precision = read_spelling(key_node, value, kPrecisionNames);
      add(mixed_precision(), std::string(to_string(precision.value)), precision.source,
          precision.origin);
    } else if (key == "amp_dtype") {
      auto dtype = read_spelling(key_node, value, kAutocastDtypes);
      if (remember(key, std::string(to_string(dtype.value)), dtype.source, dtype.origin))
        amp_dtype_ = dtype;
    } else {
      auto enabled = read_bool(key_node, value);
      if (remember(key, enabled.value ? "true" : "false", enabled.source, enabled.origin))
        use_amp_ = enabled;
    }
  }

  // torch.autocast's semantics (autocast_choice), from the line that decided.
  void resolve_use_amp() {
    const auto choice = autocast_choice(use_amp_ ? std::optional(use_amp_->value) : std::nullopt,
                                        amp_dtype_ ? std::optional(amp_dtype_->value) : std::nullopt);
    if (!choice) return;
    const auto& decided = choice->by_dtype ? amp_dtype_->source : use_amp_->source;
    const auto& origin = choice->by_dtype ? amp_dtype_->origin : use_amp_->origin;
    add(mixed_precision(), std::string(to_string(choice->precision)), decided, origin);
  }

  static const Option& mixed_precision() { return *find_option("mixed_precision"); }

  // True the first time `setting` is seen; throws when a later line gives it a different value.
  bool remember(const std::string& setting, std::string value, const Source& source,
                std::string origin) {
    auto [it, inserted] = seen_.try_emplace(setting, Seen{value, source, origin});
    const Seen& first = it->second;
    if (!inserted && first.value != value) {
      throw UsageError(fmt::format(
          "conflicting values for {}: '{}' at {} means {}, but '{}' at {} means {}", setting,
          first.origin, describe(first.source), first.value, origin, describe(source), value));
    }
    return inserted;
  }

  void add(const Option& option, std::string value, const Source& source, std::string origin) {
    if (remember(option.name, value, source, std::move(origin))) {
      assignments_.push_back({&option, std::move(value), source});
    }
  }

  std::string path_;
  Config scratch_;  // only for validating values
  std::vector<Assignment> assignments_;
  std::map<std::string, Seen> seen_;
  std::optional<Located<bool>> use_amp_;
  std::optional<Located<MixedPrecision>> amp_dtype_;
};

}  // namespace

std::vector<Assignment> read_yaml_file(const std::string& path) {
  return Reader(path).read(parse_yaml(path));
}

}  // namespace ampt::config
