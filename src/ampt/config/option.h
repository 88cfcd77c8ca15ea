// One configurable setting: its name in every source, its type and constraint, its help text,
// and type-erased access to the Config member that holds it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "ampt/config/catalog.h"
#include "ampt/config/config.h"
#include "ampt/config/enum_names.h"
#include "ampt/config/source.h"
#include "ampt/config/values.h"

namespace ampt::config {

struct Option {
  std::string name;        // canonical name, also the flag without "--": "batch_size"
  std::string section;     // YAML section ("training"); empty when YAML cannot set it
  std::string key;         // key inside the section ("batch_size", "init_scale")
  std::string env;         // "AMPT_" + upper-case name
  std::string help;        // one line for --help
  std::string constraint;  // shown by --help: ">= 1", "in (0, 1)", "non-empty"; empty if none
  std::string expected;    // what valid values look like: "an integer >= 1", "one of no, fp16"
  std::string value_hint;  // placeholder in --help: "N", "X", "no|fp16|bf16", "PATH"
  bool is_switch = false;  // boolean: a bare `--debug` means true
  bool yaml_list = false;  // YAML may give a list: items are joined with ',' (see list_option)
  // The values the layers above config allow (catalog_option): resolve() checks the final value
  // against the Catalog's list and --help shows it.
  std::vector<std::string> Catalog::*catalog_choices = nullptr;

  // Why `text` was rejected, when the option can say more than `expected`; may be empty.
  std::function<std::string(std::string_view text)> problem;

  // Parses `text`, checks the constraint and stores it; false (Config untouched) when invalid.
  std::function<bool(Config&, std::string_view text)> store;
  // The value as text that `store` accepts back: "8", "0.003", "bf16", "true".
  std::function<std::string(const Config&)> format;

  // `store`, or throws UsageError naming this option, the value, its source and `expected`.
  void set(Config& config, std::string_view text, const Source& source) const;
  std::string yaml_path() const;  // "training.batch_size"; empty when YAML cannot set it
};

// Factories for the option table. `yaml_path` is "section.key", or empty for flag/env-only.
Option integer_option(std::string name, std::string_view yaml_path, int64_t Config::*member,
                      Range range, std::string help);
Option float_option(std::string name, std::string_view yaml_path, double Config::*member,
                    Range range, std::string help);
Option bool_option(std::string name, std::string_view yaml_path, bool Config::*member,
                   std::string help);
// Free text; `non_empty` rejects "".
Option string_option(std::string name, std::string_view yaml_path, std::string Config::*member,
                     bool non_empty, std::string value_hint, std::string help);
// One of the Catalog's `choices` (the --model names), which resolve() checks once the layers are
// applied; `value_hint` stands for them where no Catalog is at hand.
Option catalog_option(std::string name, std::string_view yaml_path, std::string Config::*member,
                      std::vector<std::string> Catalog::*choices, std::string value_hint,
                      std::string help);
// Free text that `valid` accepts; `expected` describes the valid forms for error messages.
Option checked_string_option(std::string name, std::string_view yaml_path,
                             std::string Config::*member, std::function<bool(std::string_view)> valid,
                             std::string expected, std::string value_hint, std::string help);
// Free text that `problem` finds nothing wrong with (it returns "" for valid text, else a reason
// that error messages quote instead of `expected`).
Option explained_string_option(std::string name, std::string_view yaml_path,
                               std::string Config::*member,
                               std::function<std::string(std::string_view)> problem,
                               std::string expected, std::string value_hint, std::string help);
// An AutoSwitch member: "auto", or a boolean as bool_option takes it (a bare flag is true).
Option auto_switch_option(std::string name, std::string_view yaml_path,
                          AutoSwitch Config::*member, std::string help);
// `option`, made to accept a YAML list: scalars are joined with ',', and maps (schedule stages
// such as {until_step: 500, precision: fp32}) are written as the flag form `fp32:500`.
Option list_option(Option option);
// A string member restricted to `allowed` (model and dataset names).
Option choice_option(std::string name, std::string_view yaml_path, std::string Config::*member,
                     std::vector<std::string> allowed, std::string help);

// Everything a choice needs, independent of how the chosen index is stored.
Option choice_option(std::string name, std::string_view yaml_path, std::vector<std::string> allowed,
                     std::function<void(Config&, std::size_t index)> store_index,
                     std::function<std::string(const Config&)> format, std::string help);

// An enum member, spelled as in EnumNames<E>.
template <class E>
Option enum_option(std::string name, std::string_view yaml_path, E Config::*member,
                   std::string help) {
  const auto& table = EnumNames<E>::values;
  std::vector<std::string> allowed;
  for (const auto& [spelling, value] : table) allowed.emplace_back(spelling);
  return choice_option(
      std::move(name), yaml_path, std::move(allowed),
      [member, &table](Config& config, std::size_t index) { config.*member = table[index].second; },
      [member](const Config& config) { return std::string(to_string(config.*member)); },
      std::move(help));
}

}  // namespace ampt::config
