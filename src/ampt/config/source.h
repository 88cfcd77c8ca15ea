// Where a setting's value came from: shown by `ampt config` and named in every error message.
#pragma once

#include <string>

namespace ampt::config {

struct Source {
  enum class Kind { default_value, file, env, flag };
  Kind kind = Kind::default_value;
  std::string where;  // file: "path:line"; env: the variable name; flag: "--name"; default: empty

  bool operator==(const Source&) const = default;
};

// "default", "configs/a.yaml:7", "env AMPT_BATCH_SIZE" or "flag --batch_size".
std::string describe(const Source& source);

}  // namespace ampt::config
