#include "ampt/log/progress.h"

#include <fmt/format.h>

#include <algorithm>

namespace ampt::log {

std::string format_duration(double seconds) {
  if (seconds < 60.0) return fmt::format("{:.1f} s", seconds);
  const auto whole = static_cast<int64_t>(seconds);
  if (whole < 3600) return fmt::format("{} min {:02} s", whole / 60, whole % 60);
  return fmt::format("{} h {:02} min", whole / 3600, (whole % 3600) / 60);
}

namespace {

// The bar, then `counts`, then the share done and the time.
std::string bar(int64_t done, int64_t total, double elapsed_seconds, int width,
                const std::string& counts) {
  const double fraction = total > 0 ? std::clamp(static_cast<double>(done) / total, 0.0, 1.0) : 1.0;
  const int filled = static_cast<int>(fraction * width);
  const double eta = done > 0 ? elapsed_seconds * static_cast<double>(total - done) / done : 0.0;
  return fmt::format("[{}{}] {} {:3.0f}%  {} elapsed, ETA {}", std::string(filled, '#'),
                     std::string(width - filled, '.'), counts, fraction * 100.0,
                     format_duration(elapsed_seconds), format_duration(eta));
}

}  // namespace

std::string format_progress(int64_t step, int64_t total, double elapsed_seconds, int width) {
  return bar(step, total, elapsed_seconds, width,
             fmt::format("{:>{}}/{}", step, fmt::formatted_size("{}", total), total));
}

std::string format_byte_progress(int64_t done, int64_t total, double elapsed_seconds, int width) {
  constexpr double kMiB = 1024.0 * 1024.0;
  const auto total_text = fmt::format("{:.1f}", static_cast<double>(total) / kMiB);
  return bar(done, total, elapsed_seconds, width,
             fmt::format("{:>{}.1f}/{} MiB", static_cast<double>(done) / kMiB, total_text.size(),
                         total_text));
}

}  // namespace ampt::log
