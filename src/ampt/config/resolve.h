// Builds the final Config from defaults < YAML file < environment < flags, remembering where
// each setting came from.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ampt/config/catalog.h"
#include "ampt/config/config.h"
#include "ampt/config/source.h"

namespace ampt::config {

// The resolved configuration and the source of each of its settings. Immutable once built.
class Resolved {
 public:
  Resolved(Config config, std::vector<Source> sources);

  const Config& config() const { return config_; }
  // Where option `name` (canonical, e.g. "batch_size") got its value. Throws
  // std::invalid_argument for a name that is not in the option table (a programming error).
  const Source& source_of(std::string_view name) const;

 private:
  Config config_;
  std::vector<Source> sources_;  // parallel to options()
};

// `args`: the arguments after the subcommand ({"--batch_size", "8"} for `ampt train
// --batch_size 8`). `env`: the whole process environment; only AMPT_* variables are read and each
// must name an option. The YAML file comes from --config, else AMPT_CONFIG, else there is none.
// `catalog` (models::catalog()) bounds --model and reads --init_from's files. Throws UsageError
// (one line) for any invalid input, and RuntimeError for a pretrained model's or adapter's file
// that cannot be read.
Resolved resolve(const std::vector<std::string>& args,
                 const std::map<std::string, std::string>& env, const Catalog& catalog);

// True when -h or --help appears before any "--". Callers check this first and print help_text()
// instead of resolving; resolve() itself accepts and ignores the help flags.
bool wants_help(const std::vector<std::string>& args);

}  // namespace ampt::config
