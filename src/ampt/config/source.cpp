#include "ampt/config/source.h"

namespace ampt::config {

std::string describe(const Source& source) {
  switch (source.kind) {
    case Source::Kind::default_value:
      return "default";
    case Source::Kind::file:
      return source.where;
    case Source::Kind::env:
      return "env " + source.where;
    case Source::Kind::flag:
      return "flag " + source.where;
  }
  return "default";
}

}  // namespace ampt::config
