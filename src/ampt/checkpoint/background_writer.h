// Writes that must not hold up training, one at a time on a thread of their own.
#pragma once

#include <functional>
#include <future>
#include <optional>
#include <string>

namespace ampt::checkpoint {

// The training thread starts a job, polls for its end between steps and waits for it before
// starting the next or finishing the run. A job's exception becomes its outcome's error text:
// a failed write is reported by the thread that trains, never thrown on the writer's.
class BackgroundWriter {
 public:
  struct Outcome {
    std::string error;     // empty when the job succeeded
    double seconds = 0.0;  // how long the job ran
  };

  // Waits for a job in flight: a checkpoint being written is finished, not abandoned.
  ~BackgroundWriter();

  // Starts `job`; a job still in flight is waited for first (its outcome is then lost: call
  // wait() before to collect it).
  void start(std::function<void()> job);
  bool busy() const;
  // The outcome of the job that has finished since the last poll or wait; nullopt while it
  // runs, or when there is none.
  std::optional<Outcome> poll();
  // Blocks until no job is in flight; the outcome of the last one unless already collected.
  std::optional<Outcome> wait();

 private:
  std::future<Outcome> job_;
};

}  // namespace ampt::checkpoint
