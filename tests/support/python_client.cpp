// `python SCRIPT ARGS...` run by tests/support/python_server.py, a Python that has imported torch,
// transformers, peft and trl once for the whole test run (see there): run_process starts this in
// place of the virtualenv's python for a reference script. It hands the server its arguments,
// working directory, environment and stdin, stdout and stderr, and exits with the script's exit
// status. Where no server answers it starts one, and where none can start (or the server goes
// before taking the request) it runs the real python itself: the result is the same, only slower.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

[[noreturn]] void run_real_python(char** argv) {
  argv[0] = const_cast<char*>(AMPT_REAL_PYTHON);
  execv(AMPT_REAL_PYTHON, argv);
  std::fprintf(stderr, "python_client: cannot run %s: %s\n", AMPT_REAL_PYTHON, std::strerror(errno));
  _exit(127);
}

// Variables a library reads once, when it is loaded or imported: a server started under other
// values would not honour the caller's.
bool read_at_import(const std::string& name) {
  for (const char* prefix : {"OMP_", "KMP_", "GOMP_", "MKL_", "ATEN_", "ONEDNN_", "DNNL_", "TORCH", "PYTORCH_",
                             "CUDA_", "HF_", "TRANSFORMERS_", "TOKENIZERS_", "PYTHON", "LD_", "CI"}) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

std::string server_address() {
  // The server script's modification time too: an edited server is a new one, not the one still
  // idling from an earlier run.
  struct stat script{};
  std::string key = std::string(AMPT_BUILD_DIR) + '\n' +
                    (stat(AMPT_PYTHON_SERVER, &script) == 0 ? std::to_string(script.st_mtim.tv_sec) : "");
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    if (read_at_import(entry.substr(0, entry.find('=')))) key += '\n' + entry;
  }
  return "ampt-python-" + std::to_string(std::hash<std::string>{}(key));
}

int connect_to(const std::string& address) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, address.data(), address.size());  // abstract: sun_path[0] = 0
  const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + address.size());
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), length) == 0) return fd;
  close(fd);
  return -1;
}

// A server of its own, detached from this process (its own session, output to /dev/null), so it
// outlives the test that started it and serves the next.
void start_server(const std::string& address) {
  const pid_t pid = fork();
  if (pid != 0) return;
  setsid();
  if (fork() != 0) _exit(0);
  // Only /dev/null: a caller's pipe left open here would never reach its end of file.
  const int null = open("/dev/null", O_RDWR);
  for (int fd = 0; fd < 3; ++fd) dup2(null, fd);
  close_range(3, ~0U, 0);
  execl(AMPT_REAL_PYTHON, AMPT_REAL_PYTHON, AMPT_PYTHON_SERVER, address.c_str(), nullptr);
  _exit(127);
}

bool send_all(int fd, const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = send(fd, p, size, MSG_NOSIGNAL);
    if (n <= 0) return false;
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

bool recv_all(int fd, void* data, std::size_t size) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = recv(fd, p, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) run_real_python(argv);
  const std::string address = server_address();
  int fd = connect_to(address);
  if (fd < 0) {
    start_server(address);
    // The server binds before its imports, so a connection waits in its queue until they are done.
    for (int attempt = 0; fd < 0 && attempt < 200; ++attempt) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      fd = connect_to(address);
    }
    if (fd < 0) run_real_python(argv);
  }
  std::string request;
  char cwd[4096];
  request += getcwd(cwd, sizeof cwd) != nullptr ? cwd : ".";
  request += '\0' + std::to_string(argc - 1);
  for (int i = 1; i < argc; ++i) request += '\0' + std::string(argv[i]);
  for (char** e = environ; *e != nullptr; ++e) request += '\0' + std::string(*e);

  // The length, with stdin, stdout and stderr passed along as SCM_RIGHTS; then the request.
  const auto size = static_cast<uint32_t>(request.size());
  iovec iov{const_cast<uint32_t*>(&size), sizeof size};
  std::array<int, 3> fds{0, 1, 2};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof fds)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof fds);
  std::memcpy(CMSG_DATA(cmsg), fds.data(), sizeof fds);
  char started = 0;
  if (sendmsg(fd, &msg, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof size) ||
      !send_all(fd, request.data(), request.size()) || !recv_all(fd, &started, 1) || started != 'S') {
    close(fd);
    run_real_python(argv);  // the server went before it took the request
  }
  int32_t status = 0;
  if (!recv_all(fd, &status, sizeof status)) {
    std::fprintf(stderr, "python_client: the reference server %s went away while running %s\n", address.c_str(),
                 argv[1]);
    return 1;
  }
  return status;
}
