// Runs a real child process for whole-program tests: exit status, stdout and stderr.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace ampt::test {

struct ProcessResult {
  int exit_code = -1;  // 128 + signal number when the child was killed by a signal
  std::string out;
  std::string err;
};

// Runs `argv` with the parent's environment minus every AMPT_* variable, plus `env`.
ProcessResult run_process(const std::vector<std::string>& argv,
                          const std::map<std::string, std::string>& env = {},
                          const std::string& working_dir = "");

// Runs the built ampt binary with `args`.
ProcessResult run_ampt(const std::vector<std::string>& args,
                       const std::map<std::string, std::string>& env = {},
                       const std::string& working_dir = "");

// A fresh empty directory under the system temp dir, unique per call.
std::string make_temp_dir();

// Writes `text` to `path`, creating parent directories.
void write_file(const std::string& path, const std::string& text);

std::string read_file(const std::string& path);

}  // namespace ampt::test
