// Human-readable output built from the option table: `--help` text and the `ampt config` listing.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ampt/config/resolve.h"

namespace ampt::config {

// Full --help text for e.g. "ampt train": every flag with its values, constraint, default (from
// Config{}) and help, grouped by YAML section, plus how to set options via env and YAML;
// `catalog` gives --model's names.
std::string help_text(std::string_view program_and_subcommand, const Catalog& catalog);

// One aligned `name = value   (source)` line per option, grouped under `[section]` headers.
std::string describe(const Resolved& resolved);

// The inverse of describe() for what a run set: `--name=value` for every option whose source was
// not the default (the config file's own entry left out: its settings are listed one by one), so
// that resolve() of them rebuilds that run's configuration, e.g. from a checkpoint's record.
std::vector<std::string> described_flags(std::string_view description);

}  // namespace ampt::config
