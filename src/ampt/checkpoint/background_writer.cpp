#include "ampt/checkpoint/background_writer.h"

#include "ampt/core/errors.h"

#include <chrono>
#include <exception>

namespace ampt::checkpoint {

BackgroundWriter::~BackgroundWriter() {
  if (job_.valid()) job_.wait();
}

void BackgroundWriter::start(std::function<void()> job) {
  if (job_.valid()) job_.wait();
  job_ = std::async(std::launch::async, [job = std::move(job)] {
    const auto start = std::chrono::steady_clock::now();
    Outcome outcome;
    try {
      job();
    } catch (const std::exception& e) {
      outcome.error = message_of(e);
    }
    const auto end = std::chrono::steady_clock::now();
    outcome.seconds = std::chrono::duration<double>(end - start).count();
    return outcome;
  });
}

bool BackgroundWriter::busy() const {
  return job_.valid() && job_.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
}

std::optional<BackgroundWriter::Outcome> BackgroundWriter::poll() {
  if (!job_.valid() || busy()) return std::nullopt;
  return job_.get();
}

std::optional<BackgroundWriter::Outcome> BackgroundWriter::wait() {
  if (!job_.valid()) return std::nullopt;
  return job_.get();
}

}  // namespace ampt::checkpoint
