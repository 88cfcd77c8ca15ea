// Typed errors thrown by the library; only app/main.cpp turns them into exit codes.
#pragma once

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

}  // namespace ampt
