// The process's one logger: info lines on stdout, warnings on stderr, and an optional status
// line (the progress bar) kept at the bottom of a terminal.
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace ampt::log {

void set_debug(bool enabled);
bool debug_enabled();

// Writes one line to stdout (warnings to stderr), first clearing the status line if one is
// shown and redrawing it afterwards.
void write_line(std::string_view line);
void write_warning(std::string_view line);

// Replaces the status line (terminal only: the caller decides whether to use it); an empty
// string removes it.
void set_status_line(std::string_view line);

template <typename... Args>
void info(fmt::format_string<Args...> format, Args&&... args) {
  write_line(fmt::format(format, std::forward<Args>(args)...));
}

template <typename... Args>
void warn(fmt::format_string<Args...> format, Args&&... args) {
  write_warning("ampt: warning: " + fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace ampt::log
