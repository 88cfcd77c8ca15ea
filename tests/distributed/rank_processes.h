// Launches ampt as every rank of a job on loopback, as torchrun would: one process per rank with
// RANK, WORLD_SIZE and a free MASTER_PORT, each with its own working directory for its logs.
#pragma once

#include "support/process.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ampt::test {

// A port nobody listens on right now (the kernel's choice for an ephemeral bind).
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

inline std::map<std::string, std::string> rank_env(int rank, int world, int port) {
  return {{"RANK", std::to_string(rank)},       {"WORLD_SIZE", std::to_string(world)},
          {"LOCAL_RANK", std::to_string(rank)}, {"LOCAL_WORLD_SIZE", std::to_string(world)},
          {"MASTER_ADDR", "127.0.0.1"},         {"MASTER_PORT", std::to_string(port)},
          {"OMP_NUM_THREADS", "1"}};
}

struct RankRun {
  std::vector<int> status;
  std::vector<std::string> out, err;
};

// Runs `argv` as each of `world` ranks and waits for all of them; rank r's logs go to
// <logs>/rank<r>.
inline RankRun run_rank_processes(int world, const std::vector<std::string>& argv,
                                  const std::string& logs) {
  const int port = free_port();
  std::vector<std::unique_ptr<Child>> children;
  for (int r = 0; r < world; ++r) {
    std::filesystem::create_directories(fmt::format("{}/rank{}", logs, r));
    children.push_back(std::make_unique<Child>(argv, fmt::format("{}/rank{}", logs, r),
                                               rank_env(r, world, port)));
  }
  RankRun run;
  for (auto& child : children) {
    run.status.push_back(child->wait());
    run.out.push_back(child->out());
    run.err.push_back(child->err());
  }
  return run;
}

}  // namespace ampt::test
