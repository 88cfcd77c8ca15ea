// Runs a function as every rank of a Gloo group inside one process: one thread per rank, the
// ranks meeting in a shared c10d::HashStore.
#pragma once

#include "ampt/distributed/process_group.h"

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <cstdlib>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

namespace ampt::test {

inline void run_ranks(int64_t world_size, const std::function<void(distributed::Group&)>& body) {
  // c10d's flight recorder, one per process, updates its map of process groups before taking its
  // lock (PyTorch 2.11): several ranks' collectives in one process race there and crash. It only
  // keeps a trace for debugging; off, before the first group is made, it is never touched.
  ::setenv("TORCH_FR_BUFFER_SIZE", "0", 1);
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world_size));
  std::vector<std::thread> threads;
  for (int64_t rank = 0; rank < world_size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        distributed::Group group(store, rank, world_size, config::DistBackend::gloo, c10::Device(c10::kCPU),
                          std::chrono::seconds(20), "the test store", /*loopback=*/true);
        body(group);
        group.finish();
      } catch (...) {
        errors[static_cast<size_t>(rank)] = std::current_exception();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (const auto& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

}  // namespace ampt::test
