// Launches ampt as every rank of a job on loopback, as torchrun would: one process per rank with
// RANK, WORLD_SIZE and a free MASTER_PORT, each with its own working directory for its logs.
#pragma once

#include "support/process.h"

#include <arpa/inet.h>
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <functional>
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
// <logs>/rank<r>, and its environment has `rank_extra(r)` too (what differs per node).
inline RankRun run_rank_processes(
    int world, const std::vector<std::string>& argv, const std::string& logs,
    const std::function<std::map<std::string, std::string>(int)>& rank_extra = {}) {
  const int port = free_port();
  std::vector<std::unique_ptr<Child>> children;
  for (int r = 0; r < world; ++r) {
    std::filesystem::create_directories(fmt::format("{}/rank{}", logs, r));
    auto env = rank_env(r, world, port);
    if (rank_extra) env.merge(rank_extra(r));
    children.push_back(std::make_unique<Child>(argv, fmt::format("{}/rank{}", logs, r), env));
  }
  RankRun run;
  for (auto& child : children) {
    run.status.push_back(child->wait());
    run.out.push_back(child->out());
    run.err.push_back(child->err());
  }
  return run;
}

// Two ranks of `argv` (a run of very many steps with --dist_timeout 10); once rank 0 has logged
// step 3, SIGKILL for rank `victim`: the survivor must stop within the timeout, exit 1 and name
// the lost rank.
inline void check_lost_rank_is_named(const std::vector<std::string>& argv, int victim,
                                     const std::string& dir) {
  const int port = free_port();
  std::filesystem::create_directories(dir + "/rank0");
  std::filesystem::create_directories(dir + "/rank1");
  Child rank0(argv, dir + "/rank0", rank_env(0, 2, port));
  Child rank1(argv, dir + "/rank1", rank_env(1, 2, port));
  // Training is under way once rank 0 has logged its first steps.
  REQUIRE(wait_until([&] { return rank0.out().find("step       3/") != std::string::npos; }, 60));
  Child& killed = victim == 0 ? rank0 : rank1;
  Child& survivor = victim == 0 ? rank1 : rank0;
  const auto start = std::chrono::steady_clock::now();
  killed.signal(SIGKILL);
  const int status = survivor.wait();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(survivor.err());
  CHECK(status == 1);
  CHECK(seconds < 10.0 + 5.0);
  CHECK_THAT(survivor.err(), Catch::Contains(fmt::format("lost rank {}", victim)));
  CHECK(killed.wait() == 128 + SIGKILL);
}

}  // namespace ampt::test
