// Typed errors thrown by the library; only app/main.cpp turns them into exit codes.
#pragma once

#include <exception>
#include <stdexcept>
#include <string>

namespace ampt {

// The user asked for something invalid (flag, YAML, env value): exit status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Something went wrong while doing valid work (missing device, unwritable file, bad data): exit 1.
class RuntimeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What an exception says, in one line: its first. A c10::Error (torch's) puts its context and a
// C++ backtrace on the lines after its message, which no ampt output shows (main.cpp's --debug
// aside): every warning and error that reports a caught exception goes through this.
inline std::string message_of(const std::exception& error) {
  const std::string what = error.what();
  return what.substr(0, what.find('\n'));
}

}  // namespace ampt
