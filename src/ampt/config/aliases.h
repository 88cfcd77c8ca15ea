// Names other tools give ampt's settings (DeepSpeed's loss_scale_window, initial_scale_power and
// zero_optimization.stage, Accelerate's scaler_enabled) and names ampt itself used before
// (allreduce_dtype), accepted as flags, environment variables and YAML keys and turned into an
// assignment of the canonical option, so `ampt config` shows the canonical setting and where it
// came from.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ampt/config/readers.h"

namespace ampt::config {

struct Alias {
  std::string name;    // the flag without "--", and the YAML key
  std::string target;  // the canonical option's name
  // YAML sections where the key is accepted besides the top level ("scaler").
  std::vector<std::string> sections;
  // Converts the alias's text into text the target accepts; nullopt when invalid. Empty for a
  // plain synonym.
  std::optional<std::string> (*translate)(std::string_view text) = nullptr;
  std::string expected;  // what a valid value looks like, when translate is set
  // Only a key inside its sections (DeepSpeed's zero_optimization: {stage: 2}): no flag, no
  // environment variable, no top-level key, where the bare name would mean nothing.
  bool nested_only = false;
};

const std::vector<Alias>& aliases();

// The sections aliases live in that no option has ("zero_optimization").
const std::vector<std::string>& alias_only_sections();

// The alias `key` names in `section` ("" = top level), or nullptr.
const Alias* find_alias(std::string_view key, std::string_view section);

// The alias as an assignment of its target option; UsageError naming the alias and `source`
// when translate rejects the text.
Assignment alias_assignment(const Alias& alias, std::string_view text, const Source& source);

}  // namespace ampt::config
