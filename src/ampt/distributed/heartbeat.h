// Tells which rank of a distributed run died: every rank bumps a counter in the rendezvous store
// from a background thread, and watches the others' counters.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <c10/util/intrusive_ptr.h>

namespace c10d {
class Store;
}

namespace ampt::distributed {

// A rank whose counter stops moving for `stale` is lost: its process died or hangs whole (the
// thread beats while the training thread computes, saves or evaluates). When a collective fails,
// the training thread asks lost_ranks() for the culprit. When nobody asks (the training thread is
// stuck in a GPU synchronisation that will not return), the monitor itself prints the error and
// ends the process with status 1 after a grace period, so a dead rank never hangs the job.
class Heartbeat {
 public:
  Heartbeat(c10::intrusive_ptr<c10d::Store> store, int64_t rank, int64_t world_size,
            std::chrono::milliseconds stale);
  ~Heartbeat();  // stops the thread
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // Waits up to about `stale` for the monitor to single out the lost ranks, and describes them:
  // "rank 1 (no heartbeat for 5 s)"; empty when every rank still beats.
  std::string lost_ranks();
  // Ends monitoring (before a clean exit, when the ranks leave at different moments).
  void stop();

 private:
  void run();
  std::string describe_lost_locked() const;

  c10::intrusive_ptr<c10d::Store> store_;
  int64_t rank_;
  int64_t world_size_;
  std::chrono::milliseconds stale_;
  std::chrono::milliseconds period_;

  std::mutex mutex_;
  std::condition_variable changed_;
  bool stop_ = false;
  bool claimed_ = false;  // the training thread is reporting the failure itself
  std::vector<int64_t> lost_;
  std::string store_error_;  // the store itself is gone: rank 0, its host, died
  std::thread thread_;
};

}  // namespace ampt::distributed
