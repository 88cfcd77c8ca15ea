// The flags of a command that takes no training options (export, plot), parsed with cxxopts:
// malformed and unknown arguments become one-line usage errors.
#pragma once

#include <cxxopts.hpp>

#include <string>
#include <vector>

namespace ampt::commands {

// Parses `args` (those after the command's name) with `parser`, which must allow unrecognised
// options. Throws UsageError for a malformed flag, and for an unknown argument naming the
// closest of `known` ("unknown export argument '--dtpye' (did you mean '--dtype'?)").
cxxopts::ParseResult parse_own_flags(cxxopts::Options& parser, const std::string& command,
                                     const std::vector<std::string>& args,
                                     const std::vector<std::string>& known);

// The value of the string flag `name`; throws UsageError ("ampt export needs --out; see ampt
// export --help") when it is missing or empty.
std::string required_flag(const cxxopts::ParseResult& result, const std::string& command,
                          const std::string& name);

}  // namespace ampt::commands
