// Saving a run while it trains: each save pauses training only to copy the state into a host
// buffer (one, reused), then writes it in the background while the next steps run; the save's
// report reaches the observer once its write has ended, and a failed save is reported and
// trained past, except the run's last, whose failure is an error.
#pragma once

#include "ampt/checkpoint/background_writer.h"
#include "ampt/checkpoint/host_snapshot.h"
#include "ampt/core/named_tensors.h"
#include "ampt/log/events.h"

#include <c10/core/Device.h>

#include <functional>
#include <optional>
#include <string>

namespace ampt::train {

class Checkpointer {
 public:
  // The background job that writes a save, made in the pause from the host copy of its tensors.
  using Write = std::function<void()>;
  using PrepareWrite = std::function<Write(NamedTensors host)>;

  Checkpointer(const c10::Device& device, log::Observer& observer);

  // Allocates the host buffer for tensors like these, as part of startup rather than of the
  // first save's pause.
  void reserve(const NamedTensors& tensors) { snapshot_.reserve(tensors); }

  // Saves step `step` to `path`: waits for the previous save's write (its report goes out
  // first), copies `tensors` into host memory and starts prepare(host)'s job. `final`: waited
  // for, and a failure throws RuntimeError instead of being reported. The pause is counted in
  // pause_seconds().
  void save(int64_t step, std::string path, const NamedTensors& tensors,
            const PrepareWrite& prepare, log::RunSummary& summary, bool final);

  // Reports the save in flight once its write has ended (`wait`: blocks until then), into
  // `summary` and to the observer; for a final save that failed, as a RuntimeError.
  void collect(bool wait, bool final, log::RunSummary& summary);

  // Time training spent paused for saves: the summary's split, left out of throughput.
  double pause_seconds() const { return pause_seconds_; }

 private:
  c10::Device device_;
  log::Observer& observer_;
  checkpoint::HostSnapshot snapshot_;
  std::optional<log::CheckpointReport> pending_;  // the save being written
  double pause_seconds_ = 0.0;
  // Last: destroyed first, it waits for a write in flight while the snapshot still exists.
  checkpoint::BackgroundWriter writer_;
};

}  // namespace ampt::train
