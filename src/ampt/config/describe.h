// Human-readable output built from the option table: `--help` text and the `ampt config` listing.
#pragma once

#include <string>
#include <string_view>

#include "ampt/config/resolve.h"

namespace ampt::config {

// Full --help text for e.g. "ampt train": every flag with its values, constraint, default (from
// Config{}) and help, grouped by YAML section, plus how to set options via env and YAML.
std::string help_text(std::string_view program_and_subcommand);

// One aligned `name = value   (source)` line per option, grouped under `[section]` headers.
std::string describe(const Resolved& resolved);

}  // namespace ampt::config
