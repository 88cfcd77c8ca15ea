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

std::string format_progress(int64_t step, int64_t total, double elapsed_seconds, int width) {
  const double fraction = total > 0 ? std::clamp(static_cast<double>(step) / total, 0.0, 1.0) : 1.0;
  const int filled = static_cast<int>(fraction * width);
  const double eta = step > 0 ? elapsed_seconds * static_cast<double>(total - step) / step : 0.0;
  return fmt::format("[{}{}] {:>{}}/{} {:3.0f}%  {} elapsed, ETA {}", std::string(filled, '#'),
                     std::string(width - filled, '.'), step, fmt::formatted_size("{}", total),
                     total, fraction * 100.0, format_duration(elapsed_seconds),
                     format_duration(eta));
}

}  // namespace ampt::log
