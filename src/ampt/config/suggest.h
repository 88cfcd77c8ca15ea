// "Did you mean ...?" suggestions for mistyped flags, environment variables and YAML keys.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ampt::config {

// Optimal-string-alignment distance: insertions, deletions, substitutions and adjacent swaps.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate nearest to `word`, if it is close enough to be a plausible typo (distance at most
// max(2, length/3) and shorter than the word itself). Ties go to the earlier candidate.
std::optional<std::string> closest(std::string_view word,
                                   const std::vector<std::string>& candidates);

}  // namespace ampt::config
