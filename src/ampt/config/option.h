// One configurable setting: its name in every source, its type and constraint, its help text,
// and type-erased access to the member that holds it. Training options store into Config; a
// command's own flags (ampt export --out, ampt generate --top_k ...) into that command's settings
// struct, through the same factories, so every flag has one parser, one help and one error.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ampt/config/catalog.h"
#include "ampt/config/config.h"
#include "ampt/config/enum_names.h"
#include "ampt/config/source.h"
#include "ampt/config/values.h"

namespace ampt::config {

// What every option says about itself, whatever struct its value lands in.
struct OptionInfo {
  std::string name;        // canonical name, also the flag without "--": "batch_size"
  std::string section;     // YAML section ("training"); empty when YAML cannot set it
  std::string key;         // key inside the section ("batch_size", "init_scale")
  std::string env;         // "AMPT_" + upper-case name; empty for a flag-only option
  std::string help;        // one line for --help
  std::string constraint;  // shown by --help: ">= 1", "in (0, 1)", "non-empty"; empty if none
  std::string expected;    // what valid values look like: "an integer >= 1", "one of no, fp16"
  std::string value_hint;  // placeholder in --help: "N", "X", "no|fp16|bf16", "PATH"
  // Said instead of a default where the value left unset means something derived ("batch_size x
  // grad_accum_steps"); empty when the default is the formatted value.
  std::string default_note;
  bool is_switch = false;  // boolean: a bare `--debug` means true
  bool yaml_list = false;  // YAML may give a list: items are joined with ',' (see list_option)
  bool required = false;   // a command's flag that must be given (ampt export --out)
  // A command's flag that takes the arguments that are no flag: exactly one (ampt plot RUN_DIR)
  // or all of them (ampt tokenize INPUT...).
  enum class Positional { no, one, many };
  Positional positional = Positional::no;
  // The values the layers above config allow (catalog_option): resolve() checks the final value
  // against the Catalog's list and --help shows it.
  std::vector<std::string> Catalog::*catalog_choices = nullptr;

  // Why `text` was rejected, when the option can say more than `expected`; may be empty.
  std::function<std::string(std::string_view text)> problem;

  // The one-line error for `text`, which the option rejected: "invalid value 'abc' for
  // batch_size (flag --batch_size): expected an integer >= 1".
  UsageError rejected(std::string_view text, const Source& source) const;
  std::string yaml_path() const;  // "training.batch_size"; empty when YAML cannot set it
};

template <class Target>
struct BasicOption : OptionInfo {
  // Parses `text`, checks the constraint and stores it; false (target untouched) when invalid.
  std::function<bool(Target&, std::string_view text)> store;
  // The value as text that `store` accepts back: "8", "0.003", "bf16", "true".
  std::function<std::string(const Target&)> format;

  // `store`, or throws UsageError naming this option, the value, its source and `expected`.
  void set(Target& target, std::string_view text, const Source& source) const {
    if (!store(target, text)) throw rejected(text, source);
  }
};

using Option = BasicOption<Config>;

// One flag as help and the reference show it: its description and its default as text.
struct FlagReference {
  const OptionInfo* option;
  std::string default_text;
};

// The parts every option shares (name, env name, YAML place, help); the factories below fill in
// type, constraint and access.
OptionInfo named_option(std::string name, std::string_view yaml_path, std::string help);

// An option over T with `info`'s description and no access yet.
template <class T>
BasicOption<T> described(OptionInfo info) {
  BasicOption<T> option;
  static_cast<OptionInfo&>(option) = std::move(info);
  return option;
}
// `expected` is `kind` followed by the constraint ("an integer >= 1").
void constrain(OptionInfo& option, std::string_view kind, std::string constraint);

// Factories for an option table. `yaml_path` is "section.key", or empty for flag/env-only.
template <class T>
BasicOption<T> integer_option(std::string name, std::string_view yaml_path, int64_t T::*member,
                              Range range, std::string help) {
  auto option = described<T>(named_option(std::move(name), yaml_path, std::move(help)));
  constrain(option, "an integer", range.text());
  option.value_hint = "N";
  option.store = [member, range](T& target, std::string_view text) {
    auto value = parse_int(text);
    if (!value || !range.contains(static_cast<double>(*value))) return false;
    target.*member = *value;
    return true;
  };
  option.format = [member](const T& target) { return fmt::format("{}", target.*member); };
  return option;
}

// An integer that may be left unset (std::nullopt): `default_note` says what unset means.
template <class T>
BasicOption<T> optional_integer_option(std::string name, std::string_view yaml_path,
                                       std::optional<int64_t> T::*member, Range range,
                                       std::string default_note, std::string help) {
  auto option = described<T>(named_option(std::move(name), yaml_path, std::move(help)));
  constrain(option, "an integer", range.text());
  option.value_hint = "N";
  option.default_note = std::move(default_note);
  option.store = [member, range](T& target, std::string_view text) {
    auto value = parse_int(text);
    if (!value || !range.contains(static_cast<double>(*value))) return false;
    target.*member = *value;
    return true;
  };
  option.format = [member](const T& target) {
    return target.*member ? fmt::format("{}", *(target.*member)) : std::string();
  };
  return option;
}

template <class T>
BasicOption<T> float_option(std::string name, std::string_view yaml_path, double T::*member,
                            Range range, std::string help) {
  auto option = described<T>(named_option(std::move(name), yaml_path, std::move(help)));
  constrain(option, "a number", range.text());
  option.value_hint = "X";
  option.store = [member, range](T& target, std::string_view text) {
    auto value = parse_float(text);
    if (!value || !range.contains(*value)) return false;
    target.*member = *value;
    return true;
  };
  // fmt's shortest round-trip form, so the printed text parses back to the identical double.
  option.format = [member](const T& target) { return fmt::format("{}", target.*member); };
  return option;
}

template <class T>
BasicOption<T> bool_option(std::string name, std::string_view yaml_path, bool T::*member,
                           std::string help) {
  auto option = described<T>(named_option(std::move(name), yaml_path, std::move(help)));
  option.expected = kBooleanExpected;
  option.value_hint = "BOOL";
  option.is_switch = true;
  option.store = [member](T& target, std::string_view text) {
    auto value = parse_bool(text);
    if (!value) return false;
    target.*member = *value;
    return true;
  };
  option.format = [member](const T& target) {
    return std::string(target.*member ? "true" : "false");
  };
  return option;
}

// An AutoSwitch member: "auto", or a boolean as bool_option takes it (a bare flag is true).
template <class T>
BasicOption<T> auto_switch_option(std::string name, std::string_view yaml_path,
                                  AutoSwitch T::*member, std::string help) {
  auto option = described<T>(named_option(std::move(name), yaml_path, std::move(help)));
  option.expected = fmt::format("auto or {}", kBooleanExpected);
  option.value_hint = "auto|BOOL";
  option.is_switch = true;
  option.store = [member](T& target, std::string_view text) {
    if (text == "auto") {
      target.*member = AutoSwitch::auto_select;
      return true;
    }
    auto value = parse_bool(text);
    if (!value) return false;
    target.*member = *value ? AutoSwitch::on : AutoSwitch::off;
    return true;
  };
  option.format = [member](const T& target) {
    const auto value = target.*member;
    return std::string(value == AutoSwitch::auto_select ? "auto"
                       : value == AutoSwitch::on        ? "true"
                                                        : "false");
  };
  return option;
}

// Free text that `valid` accepts; `expected` describes the valid forms for error messages.
template <class T>
BasicOption<T> checked_string_option(std::string name, std::string_view yaml_path,
                                     std::string T::*member,
                                     std::function<bool(std::string_view)> valid,
                                     std::string expected, std::string value_hint,
                                     std::string help) {
  auto option = described<T>(named_option(std::move(name), yaml_path, std::move(help)));
  option.expected = std::move(expected);
  option.value_hint = std::move(value_hint);
  option.store = [member, valid = std::move(valid)](T& target, std::string_view text) {
    if (!valid(text)) return false;
    target.*member = text;
    return true;
  };
  option.format = [member](const T& target) { return target.*member; };
  return option;
}

// Free text that `problem` finds nothing wrong with: it returns "" for valid text, else a reason
// that error messages quote instead of `expected`.
template <class T>
BasicOption<T> explained_string_option(std::string name, std::string_view yaml_path,
                                       std::string T::*member,
                                       std::function<std::string(std::string_view)> problem,
                                       std::string expected, std::string value_hint,
                                       std::string help) {
  auto option = checked_string_option<T>(
      std::move(name), yaml_path, member,
      [problem](std::string_view text) { return problem(text).empty(); }, std::move(expected),
      std::move(value_hint), std::move(help));
  option.problem = std::move(problem);
  return option;
}

// Free text; `non_empty` rejects "".
template <class T>
BasicOption<T> string_option(std::string name, std::string_view yaml_path, std::string T::*member,
                             bool non_empty, std::string value_hint, std::string help) {
  auto option = checked_string_option<T>(
      std::move(name), yaml_path, member,
      [non_empty](std::string_view text) { return !non_empty || !text.empty(); },
      non_empty ? "a non-empty string" : "a string", std::move(value_hint), std::move(help));
  option.constraint = non_empty ? "non-empty" : "";
  return option;
}

// One of the Catalog's `choices` (the --model names), which resolve() checks once the layers are
// applied; `value_hint` stands for them where no Catalog is at hand.
template <class T>
BasicOption<T> catalog_option(std::string name, std::string_view yaml_path, std::string T::*member,
                              std::vector<std::string> Catalog::*choices, std::string value_hint,
                              std::string help) {
  auto option = string_option<T>(std::move(name), yaml_path, member, false, std::move(value_hint),
                                 std::move(help));
  option.expected = "one of the names --help lists";
  option.catalog_choices = choices;
  return option;
}

// `option`, made to accept a YAML list: scalars are joined with ',', and maps (schedule stages
// such as {until_step: 500, precision: fp32}) are written as the flag form `fp32:500`.
template <class T>
BasicOption<T> list_option(BasicOption<T> option) {
  option.yaml_list = true;
  return option;
}

// Everything a choice needs, independent of how the chosen index is stored.
template <class T>
BasicOption<T> choice_option(std::string name, std::string_view yaml_path,
                             std::vector<std::string> allowed,
                             std::function<void(T&, std::size_t index)> store_index,
                             std::function<std::string(const T&)> format, std::string help) {
  auto option = described<T>(named_option(std::move(name), yaml_path, std::move(help)));
  option.expected = fmt::format("one of {}", fmt::join(allowed, ", "));
  option.value_hint = fmt::format("{}", fmt::join(allowed, "|"));
  option.store = [allowed, store_index](T& target, std::string_view text) {
    auto found = std::ranges::find(allowed, text);
    if (found == allowed.end()) return false;
    store_index(target, static_cast<std::size_t>(found - allowed.begin()));
    return true;
  };
  option.format = std::move(format);
  return option;
}

// A string member restricted to `allowed` (signal names, export formats).
template <class T>
BasicOption<T> choice_option(std::string name, std::string_view yaml_path, std::string T::*member,
                             std::vector<std::string> allowed, std::string help) {
  auto store_index = [member, allowed](T& target, std::size_t index) {
    target.*member = allowed[index];
  };
  auto format = [member](const T& target) { return target.*member; };
  return choice_option<T>(std::move(name), yaml_path, std::move(allowed), std::move(store_index),
                          std::move(format), std::move(help));
}

// An enum member, spelled as in EnumNames<E>.
template <class T, class E>
BasicOption<T> enum_option(std::string name, std::string_view yaml_path, E T::*member,
                           std::string help) {
  const auto& table = EnumNames<E>::values;
  std::vector<std::string> allowed;
  for (const auto& [spelling, value] : table) allowed.emplace_back(spelling);
  return choice_option<T>(
      std::move(name), yaml_path, std::move(allowed),
      [member, &table](T& target, std::size_t index) { target.*member = table[index].second; },
      [member](const T& target) { return std::string(to_string(target.*member)); },
      std::move(help));
}

// A command's own flag: no AMPT_ variable and no YAML key, which set training options only.
template <class T>
BasicOption<T> flag_only(BasicOption<T> option) {
  option.env.clear();
  option.section.clear();
  option.key.clear();
  return option;
}

// `option`, whose value left empty means what `note` says ("the synthetic data's shape").
template <class T>
BasicOption<T> default_noted(BasicOption<T> option, std::string note) {
  option.default_note = std::move(note);
  return option;
}

template <class T>
BasicOption<T> required(BasicOption<T> option) {
  option.required = true;
  return option;
}

// The arguments that are no flag, in order: every one (a list member) or exactly one (a string).
template <class T>
BasicOption<T> positional_option(std::string name, std::vector<std::string> T::*member,
                                 std::string value_hint, std::string help) {
  auto option = described<T>(named_option(std::move(name), "", std::move(help)));
  option.env.clear();
  option.expected = "a non-empty string";
  option.value_hint = std::move(value_hint);
  option.positional = OptionInfo::Positional::many;
  option.store = [member](T& target, std::string_view text) {
    if (text.empty()) return false;
    (target.*member).emplace_back(text);
    return true;
  };
  option.format = [member](const T& target) { return fmt::format("{}", fmt::join(target.*member, " ")); };
  return option;
}

template <class T>
BasicOption<T> positional_option(std::string name, std::string T::*member, std::string value_hint,
                                 std::string help) {
  auto option = flag_only(string_option<T>(std::move(name), "", member, true,
                                           std::move(value_hint), std::move(help)));
  option.positional = OptionInfo::Positional::one;
  return option;
}

}  // namespace ampt::config
