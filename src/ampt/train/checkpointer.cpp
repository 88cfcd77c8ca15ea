#include "ampt/train/checkpointer.h"

#include "ampt/core/errors.h"
#include "ampt/train/clock.h"

#include <fmt/format.h>
#include <torch/cuda.h>

#include <chrono>
#include <filesystem>

namespace ampt::train {
namespace {

// A checkpoint file's size, or all of a sharded checkpoint's files together.
int64_t bytes_on_disk(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return static_cast<int64_t>(fs::file_size(path, ec));
  int64_t total = 0;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    total += static_cast<int64_t>(entry.file_size(ec));
  }
  return total;
}

}  // namespace

Checkpointer::Checkpointer(const c10::Device& device, log::Observer& observer)
    : device_(device), observer_(observer) {}

void Checkpointer::save(int64_t step, std::string path, const NamedTensors& tensors,
                        const PrepareWrite& prepare, log::RunSummary& summary, bool final) {
  // Queued steps are training's time, not the pause's.
  if (device_.is_cuda()) torch::cuda::synchronize();
  const auto paused = Clock::now();
  const bool waits = writer_.busy();
  collect(/*wait=*/true, /*final=*/false, summary);  // it is done with the snapshot buffer
  const double waited = waits ? seconds_since(paused) : 0.0;
  log::CheckpointReport report;
  report.step = step;
  report.path = std::move(path);
  writer_.start(prepare(snapshot_.capture(tensors)));
  report.pause_seconds = seconds_since(paused);
  report.wait_seconds = waited;
  pending_ = std::move(report);
  if (final) collect(/*wait=*/true, /*final=*/true, summary);
  pause_seconds_ += seconds_since(paused);
}

void Checkpointer::collect(bool wait, bool final, log::RunSummary& summary) {
  if (!pending_) return;
  const auto outcome = wait ? writer_.wait() : writer_.poll();
  if (!outcome) return;
  auto report = std::move(*pending_);
  pending_.reset();
  report.write_seconds = outcome->seconds;
  report.error = outcome->error;
  if (!report.error.empty() && final) {
    throw RuntimeError(
        fmt::format("checkpoint of step {} not saved: {}", report.step, report.error));
  }
  if (report.error.empty()) {
    report.bytes = bytes_on_disk(report.path);
    summary.checkpoint = report.path;
    ++summary.checkpoints_saved;
    summary.checkpoint_bytes += report.bytes;
    summary.checkpoint_write_seconds += report.write_seconds;
  }
  observer_.on_checkpoint(report);
}

}  // namespace ampt::train
