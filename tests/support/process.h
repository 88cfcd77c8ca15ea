// Runs a real child process for whole-program tests: exit status, stdout and stderr.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace ampt::test {

struct ProcessResult {
  int exit_code = -1;  // 128 + signal number when the child was killed by a signal
  std::string out;
  std::string err;
};

// Runs `argv` with the parent's environment minus every AMPT_* variable and every launcher
// variable (RANK, MASTER_ADDR, SLURM_* ...), plus `env`.
ProcessResult run_process(const std::vector<std::string>& argv,
                          const std::map<std::string, std::string>& env = {},
                          const std::string& working_dir = "");

// Runs the built ampt binary with `args`.
ProcessResult run_ampt(const std::vector<std::string>& args,
                       const std::map<std::string, std::string>& env = {},
                       const std::string& working_dir = "");

// A fresh empty directory under the system temp dir, unique per call; removed when the process
// exits.
std::string make_temp_dir();

// The names in `dir`, sorted.
std::vector<std::string> entries(const std::string& dir);

// Writes `text` to `path`, creating parent directories.
void write_file(const std::string& path, const std::string& text);

std::string read_file(const std::string& path);

}  // namespace ampt::test

namespace ampt::test {

// A child process left running, for tests that signal it mid-run. Its stdout and stderr go to
// files in `log_dir`.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::string& log_dir,
        const std::map<std::string, std::string>& env = {});
  ~Child();  // kills the child if it still runs
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  void signal(int signal_number) const;
  int wait();  // exit status, 128 + signal when killed by one
  std::string out() const;
  std::string err() const;

 private:
  int pid_ = -1;
  bool reaped_ = false;
  std::string log_dir_;
};

// Polls `predicate` every 20 ms for up to `seconds`; true as soon as it holds.
bool wait_until(const std::function<bool()>& predicate, double seconds);

}  // namespace ampt::test
