#include "ampt/distributed/heartbeat.h"

#include "ampt/core/errors.h"

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

namespace ampt::distributed {
namespace {

using Clock = std::chrono::steady_clock;

std::string key(int64_t rank) { return fmt::format("ampt/heartbeat/{}", rank); }

}  // namespace

Heartbeat::Heartbeat(c10::intrusive_ptr<c10d::Store> store, int64_t rank, int64_t world_size,
                     std::chrono::milliseconds stale)
    : store_(std::move(store)),
      rank_(rank),
      world_size_(world_size),
      stale_(stale),
      period_(std::max<std::chrono::milliseconds>(stale / 10, std::chrono::milliseconds(50))) {
  thread_ = std::thread([this] { run(); });
}

Heartbeat::~Heartbeat() { stop(); }

void Heartbeat::stop() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Heartbeat::run() {
  std::vector<int64_t> last(static_cast<size_t>(world_size_), -1);
  std::vector<Clock::time_point> moved(static_cast<size_t>(world_size_), Clock::now());
  std::vector<std::string> keys;
  for (int64_t r = 0; r < world_size_; ++r) keys.push_back(key(r));
  bool created = false;
  std::unique_lock lock(mutex_);
  while (!stop_) {
    lock.unlock();
    std::vector<int64_t> lost;
    std::string store_error;
    try {
      // add(key, 0) creates every counter without waiting for its rank, so one multiGet reads
      // them all: a round trip per period, whatever the world size.
      if (!created) {
        for (const auto& k : keys) store_->add(k, 0);
        created = true;
      }
      store_->add(key(rank_), 1);
      const auto counts = store_->multiGet(keys);
      const auto now = Clock::now();
      for (int64_t r = 0; r < world_size_; ++r) {
        if (r == rank_) continue;
        const int64_t count = std::stoll(std::string(counts[r].begin(), counts[r].end()));
        if (count != last[r]) {
          last[r] = count;
          moved[r] = now;
        } else if (now - moved[r] > stale_) {
          lost.push_back(r);
        }
      }
    } catch (const std::exception& error) {
      store_error = message_of(error);
    }
    lock.lock();
    if (!lost.empty() || !store_error.empty()) {
      lost_ = std::move(lost);
      store_error_ = std::move(store_error);
      changed_.notify_all();
      // The training thread normally reports the failure (a collective fails at once when a peer's
      // connection drops); give it a moment, then end a process stuck where it cannot notice.
      changed_.wait_for(lock, stale_, [this] { return stop_ || claimed_; });
      if (stop_ || claimed_) return;
      std::fprintf(stderr, "ampt: error: rank %lld lost %s; stopping\n",
                   static_cast<long long>(rank_), describe_lost_locked().c_str());
      std::fflush(stderr);
      std::_Exit(1);
    }
    changed_.wait_for(lock, period_, [this] { return stop_; });
  }
}

std::string Heartbeat::describe_lost_locked() const {
  if (!store_error_.empty()) {
    return fmt::format("rank 0 (the rendezvous store it serves stopped answering: {})",
                       store_error_);
  }
  std::string ranks;
  for (int64_t r : lost_) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  return fmt::format("rank{} {} (no heartbeat for {} s)", lost_.size() > 1 ? "s" : "", ranks,
                     std::chrono::duration<double>(stale_).count());
}

std::string Heartbeat::lost_ranks() {
  std::unique_lock lock(mutex_);
  claimed_ = true;
  changed_.notify_all();
  changed_.wait_for(lock, stale_ + 3 * period_,
                    [this] { return !lost_.empty() || !store_error_.empty(); });
  if (lost_.empty() && store_error_.empty()) return {};
  return describe_lost_locked();
}

}  // namespace ampt::distributed
