// Names other tools give ampt's settings (DeepSpeed's loss_scale_window, initial_scale_power,
// Accelerate's scaler_enabled), accepted as flags and YAML keys and turned into an assignment of
// the canonical option, so `ampt config` shows the canonical setting and where it came from.
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
};

const std::vector<Alias>& aliases();

// The alias `key` names in `section` ("" = top level), or nullptr.
const Alias* find_alias(std::string_view key, std::string_view section);

// The alias as an assignment of its target option; UsageError naming the alias and `source`
// when translate rejects the text.
Assignment alias_assignment(const Alias& alias, std::string_view text, const Source& source);

}  // namespace ampt::config
