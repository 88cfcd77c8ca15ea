// The terminal progress bar's text.
#pragma once

#include <cstdint>
#include <string>

namespace ampt::log {

// "[#########...........]  450/1000  45%  12.3 s elapsed, ETA 15.0 s", `width` cells of bar.
std::string format_progress(int64_t step, int64_t total, double elapsed_seconds, int width = 30);

// The same for bytes: "[#########...........] 45.0/100.0 MiB  45%  12.3 s elapsed, ETA 15.0 s".
std::string format_byte_progress(int64_t done, int64_t total, double elapsed_seconds,
                                 int width = 30);

// "1.2 s", "3 min 05 s", "2 h 10 min".
std::string format_duration(double seconds);

}  // namespace ampt::log
