#include "ampt/config/option.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace ampt::config {

void Option::set(Config& config, std::string_view text, const Source& source) const {
  if (store(config, text)) return;
  const std::string why = problem ? problem(text) : std::string();
  if (why.empty()) throw invalid_value(name, text, source, expected);
  throw UsageError(fmt::format("invalid value '{}' for {} ({}): {}", text, name, describe(source), why));
}

std::string Option::yaml_path() const { return section.empty() ? "" : section + "." + key; }

namespace {

// The parts every option shares; the factories fill in type, constraint and access.
Option named(std::string name, std::string_view yaml_path, std::string help) {
  Option option;
  option.env = "AMPT_" + name;
  std::ranges::transform(option.env, option.env.begin(),
                         [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (auto dot = yaml_path.find('.'); dot != std::string_view::npos) {
    option.section = yaml_path.substr(0, dot);
    option.key = yaml_path.substr(dot + 1);
  }
  option.name = std::move(name);
  option.help = std::move(help);
  return option;
}

void constrain(Option& option, std::string_view kind, std::string constraint) {
  option.expected = constraint.empty() ? std::string(kind) : fmt::format("{} {}", kind, constraint);
  option.constraint = std::move(constraint);
}

}  // namespace

Option integer_option(std::string name, std::string_view yaml_path, int64_t Config::*member,
                      Range range, std::string help) {
  Option option = named(std::move(name), yaml_path, std::move(help));
  constrain(option, "an integer", range.text());
  option.value_hint = "N";
  option.store = [member, range](Config& config, std::string_view text) {
    auto value = parse_int(text);
    if (!value || !range.contains(static_cast<double>(*value))) return false;
    config.*member = *value;
    return true;
  };
  option.format = [member](const Config& config) { return fmt::format("{}", config.*member); };
  return option;
}

Option float_option(std::string name, std::string_view yaml_path, double Config::*member,
                    Range range, std::string help) {
  Option option = named(std::move(name), yaml_path, std::move(help));
  constrain(option, "a number", range.text());
  option.value_hint = "X";
  option.store = [member, range](Config& config, std::string_view text) {
    auto value = parse_float(text);
    if (!value || !range.contains(*value)) return false;
    config.*member = *value;
    return true;
  };
  // fmt's shortest round-trip form, so the printed text parses back to the identical double.
  option.format = [member](const Config& config) { return fmt::format("{}", config.*member); };
  return option;
}

Option bool_option(std::string name, std::string_view yaml_path, bool Config::*member,
                   std::string help) {
  Option option = named(std::move(name), yaml_path, std::move(help));
  option.expected = kBooleanExpected;
  option.value_hint = "BOOL";
  option.is_switch = true;
  option.store = [member](Config& config, std::string_view text) {
    auto value = parse_bool(text);
    if (!value) return false;
    config.*member = *value;
    return true;
  };
  option.format = [member](const Config& config) { return config.*member ? "true" : "false"; };
  return option;
}

Option auto_switch_option(std::string name, std::string_view yaml_path,
                          AutoSwitch Config::*member, std::string help) {
  Option option = named(std::move(name), yaml_path, std::move(help));
  option.expected = fmt::format("auto or {}", kBooleanExpected);
  option.value_hint = "auto|BOOL";
  option.is_switch = true;
  option.store = [member](Config& config, std::string_view text) {
    if (text == "auto") {
      config.*member = AutoSwitch::auto_select;
      return true;
    }
    auto value = parse_bool(text);
    if (!value) return false;
    config.*member = *value ? AutoSwitch::on : AutoSwitch::off;
    return true;
  };
  option.format = [member](const Config& config) {
    const auto value = config.*member;
    return std::string(value == AutoSwitch::auto_select ? "auto"
                       : value == AutoSwitch::on        ? "true"
                                                        : "false");
  };
  return option;
}

Option string_option(std::string name, std::string_view yaml_path, std::string Config::*member,
                     bool non_empty, std::string value_hint, std::string help) {
  Option option = named(std::move(name), yaml_path, std::move(help));
  option.expected = non_empty ? "a non-empty string" : "a string";
  option.constraint = non_empty ? "non-empty" : "";
  option.value_hint = std::move(value_hint);
  option.store = [member, non_empty](Config& config, std::string_view text) {
    if (non_empty && text.empty()) return false;
    config.*member = text;
    return true;
  };
  option.format = [member](const Config& config) { return config.*member; };
  return option;
}

Option checked_string_option(std::string name, std::string_view yaml_path,
                             std::string Config::*member, std::function<bool(std::string_view)> valid,
                             std::string expected, std::string value_hint, std::string help) {
  Option option = named(std::move(name), yaml_path, std::move(help));
  option.expected = std::move(expected);
  option.value_hint = std::move(value_hint);
  option.store = [member, valid = std::move(valid)](Config& config, std::string_view text) {
    if (!valid(text)) return false;
    config.*member = text;
    return true;
  };
  option.format = [member](const Config& config) { return config.*member; };
  return option;
}

Option catalog_option(std::string name, std::string_view yaml_path, std::string Config::*member,
                      std::vector<std::string> Catalog::*choices, std::string value_hint,
                      std::string help) {
  Option option = string_option(std::move(name), yaml_path, member, false, std::move(value_hint),
                                std::move(help));
  option.expected = "one of the names --help lists";
  option.catalog_choices = choices;
  return option;
}

Option explained_string_option(std::string name, std::string_view yaml_path,
                               std::string Config::*member,
                               std::function<std::string(std::string_view)> problem,
                               std::string expected, std::string value_hint, std::string help) {
  Option option = checked_string_option(
      std::move(name), yaml_path, member,
      [problem](std::string_view text) { return problem(text).empty(); }, std::move(expected),
      std::move(value_hint), std::move(help));
  option.problem = std::move(problem);
  return option;
}

Option list_option(Option option) {
  option.yaml_list = true;
  return option;
}

Option choice_option(std::string name, std::string_view yaml_path, std::vector<std::string> allowed,
                     std::function<void(Config&, std::size_t index)> store_index,
                     std::function<std::string(const Config&)> format, std::string help) {
  Option option = named(std::move(name), yaml_path, std::move(help));
  option.expected = fmt::format("one of {}", fmt::join(allowed, ", "));
  option.value_hint = fmt::format("{}", fmt::join(allowed, "|"));
  option.store = [allowed, store_index](Config& config, std::string_view text) {
    auto found = std::ranges::find(allowed, text);
    if (found == allowed.end()) return false;
    store_index(config, static_cast<std::size_t>(found - allowed.begin()));
    return true;
  };
  option.format = std::move(format);
  return option;
}

Option choice_option(std::string name, std::string_view yaml_path, std::string Config::*member,
                     std::vector<std::string> allowed, std::string help) {
  auto store_index = [member, allowed](Config& config, std::size_t index) {
    config.*member = allowed[index];
  };
  auto format = [member](const Config& config) { return config.*member; };
  return choice_option(std::move(name), yaml_path, std::move(allowed), std::move(store_index),
                       std::move(format), std::move(help));
}

}  // namespace ampt::config
