// The option table: every setting of ampt, defined exactly once.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ampt/config/option.h"

namespace ampt::config {

// All options, grouped by YAML section in the order --help and `ampt config` print them.
const std::vector<Option>& options();

// Every option with its default (Config{}'s value) as text, in table order.
std::vector<FlagReference> training_references();

// The YAML sections in table order: "run", "checkpoint", "amp", "scaler", "training", "model",
// "data".
const std::vector<std::string>& sections();

// Lookup by canonical name ("batch_size"); nullptr when there is none.
const Option* find_option(std::string_view name);

// The string form of the option's current value in `config`, e.g. format_value(cfg, "lr").
// Throws std::invalid_argument for a name that is not in the table (a programming error).
std::string format_value(const Config& config, std::string_view name);

}  // namespace ampt::config
