#include "support/process.h"

#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <thread>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <cstdlib>

extern char** environ;

namespace ampt::test {
namespace {

// A launcher's variables would make every child a rank of a job: tests run inside srun or
// torchrun must still start single processes unless a test sets them itself.
bool is_launcher_variable(const std::string& name) {
  static const std::set<std::string> names = {"RANK",        "WORLD_SIZE", "LOCAL_RANK",
                                              "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
                                              "MASTER_PORT"};
  return names.contains(name) || name.rfind("SLURM_", 0) == 0;
}

std::vector<std::string> child_environment(const std::map<std::string, std::string>& extra) {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    if (name.rfind("AMPT_", 0) == 0 || is_launcher_variable(name) || extra.count(name) != 0) {
      continue;
    }
    out.push_back(entry);
  }
  for (const auto& [name, value] : extra) out.push_back(name + "=" + value);
  return out;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Reads both pipes until the child closes them, so neither can fill up and block the child.
void drain(int out_fd, int err_fd, std::string& out, std::string& err) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::string* sinks[2] = {&out, &err};
  int open_count = 2;
  char buffer[65536];
  while (open_count > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error("poll failed");
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP)) == 0) continue;
      const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(n));
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_count;
      }
    }
  }
}

}  // namespace

// Spawns argv with stdout/stderr redirected as `actions` says and the environment of
// child_environment(env).
pid_t spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
            posix_spawn_file_actions_t* actions) {
  std::vector<std::string> args = argv;
#ifdef AMPT_PYTHON_CLIENT
  // A reference script runs in the Python that has imported torch and transformers already
  // (support/python_server.py); AMPT_PYTHON_SERVER=0 runs each in a python of its own.
  const char* server = std::getenv("AMPT_PYTHON_SERVER");
  if (args.size() >= 2 && args[0] == AMPT_PYTHON && args[1].ends_with(".py") &&
      (server == nullptr || std::string(server) != "0")) {
    args[0] = AMPT_PYTHON_CLIENT;
  }
#endif
  std::vector<std::string> envs = child_environment(env);
  auto c_args = c_strings(args);
  auto c_envs = c_strings(envs);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, c_args[0], actions, nullptr, c_args.data(), c_envs.data());
  if (rc != 0) throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
  return pid;
}

int exit_status(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

ProcessResult run_process(const std::vector<std::string>& argv,
                          const std::map<std::string, std::string>& env,
                          const std::string& working_dir) {
  int out_pipe[2];
  int err_pipe[2];
  if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0) throw std::runtime_error("pipe failed");

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, out_pipe[0]);
  posix_spawn_file_actions_addclose(&actions, err_pipe[0]);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  if (!working_dir.empty()) posix_spawn_file_actions_addchdir_np(&actions, working_dir.c_str());

  pid_t pid = -1;
  try {
    pid = spawn(argv, env, &actions);
  } catch (...) {
    posix_spawn_file_actions_destroy(&actions);
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) close(fd);
    throw;
  }
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  close(err_pipe[1]);

  ProcessResult result;
  drain(out_pipe[0], err_pipe[0], result.out, result.err);
  result.exit_code = exit_status(pid);
  return result;
}

ProcessResult run_ampt(const std::vector<std::string>& args,
                       const std::map<std::string, std::string>& env,
                       const std::string& working_dir) {
  std::vector<std::string> argv{AMPT_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv, env, working_dir);
}

namespace {

int remove_entry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }

// Removes the dirs this process made when it exits, so a CI run does not leave gigabytes of runs
// in /tmp. nftw, not std::filesystem::remove_all: see make_temp_dir. AMPT_KEEP_TEST_DIRS=1 keeps
// them for a post-mortem.
class TempDirs {
 public:
  void add(const std::string& dir) {
    std::lock_guard<std::mutex> lock(mutex_);
    dirs_.push_back(dir);
  }
  ~TempDirs() {
    const char* keep = std::getenv("AMPT_KEEP_TEST_DIRS");
    if (keep != nullptr && std::string(keep) == "1") return;
    for (const auto& dir : dirs_) ::nftw(dir.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> dirs_;
};

TempDirs& temp_dirs() {
  static TempDirs dirs;
  return dirs;
}

}  // namespace

// mkdtemp, not a name from the pid: pids wrap within one CI run, and clearing a reused name with
// std::filesystem::remove_all crashes, because the torch wheel's libtorch.so exports its own
// broken copy of that function and it wins symbol resolution in every binary linked to it.
std::string make_temp_dir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "ampt_test_XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("cannot create a temp dir from " + pattern + ": " + std::strerror(errno));
  }
  temp_dirs().add(pattern);
  return pattern;
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

void write_file(const std::string& path, const std::string& text) {
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  std::ofstream(path, std::ios::binary) << text;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

Child::Child(const std::vector<std::string>& argv, const std::string& log_dir,
             const std::map<std::string, std::string>& env)
    : log_dir_(log_dir) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  const auto out = log_dir + "/child.out";
  const auto err = log_dir + "/child.err";
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  try {
    pid_ = spawn(argv, env, &actions);
  } catch (...) {
    posix_spawn_file_actions_destroy(&actions);
    throw;
  }
  posix_spawn_file_actions_destroy(&actions);
}

Child::~Child() {
  if (reaped_) return;
  ::kill(pid_, SIGKILL);
  exit_status(pid_);
}

void Child::signal(int signal_number) const { ::kill(pid_, signal_number); }

int Child::wait() {
  reaped_ = true;
  return exit_status(pid_);
}

std::string Child::out() const { return read_file(log_dir_ + "/child.out"); }
std::string Child::err() const { return read_file(log_dir_ + "/child.err"); }

bool wait_until(const std::function<bool()>& predicate, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (predicate()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return predicate();
}

}  // namespace ampt::test
