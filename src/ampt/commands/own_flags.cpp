#include "ampt/commands/own_flags.h"

#include "ampt/config/suggest.h"
#include "ampt/core/errors.h"

namespace ampt::commands {

cxxopts::ParseResult parse_own_flags(cxxopts::Options& parser, const std::string& command,
                                     const std::vector<std::string>& args,
                                     const std::vector<std::string>& known) {
  const std::string program = "ampt " + command;
  std::vector<const char*> argv{program.c_str()};
  for (const auto& a : args) argv.push_back(a.c_str());
  cxxopts::ParseResult result;
  try {
    result = parser.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const cxxopts::exceptions::exception& e) {
    throw UsageError(program + ": " + e.what());
  }
  if (!result.unmatched().empty()) {
    const auto& unknown = result.unmatched().front();
    const auto near = config::closest(unknown, known);
    throw UsageError("unknown " + command + " argument '" + unknown + "'" +
                     (near ? " (did you mean '" + *near + "'?)" : ""));
  }
  return result;
}

std::string required_flag(const cxxopts::ParseResult& result, const std::string& command,
                          const std::string& name) {
  if (result.count(name) == 0 || result[name].as<std::string>().empty()) {
    throw UsageError("ampt " + command + " needs --" + name + "; see ampt " + command + " --help");
  }
  return result[name].as<std::string>();
}

}  // namespace ampt::commands
