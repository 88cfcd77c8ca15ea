#include "ampt/config/report_to.h"

#include "ampt/config/suggest.h"
#include "ampt/config/values.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace ampt::config {
namespace {

const std::vector<std::string> kNames = {"jsonl", "tensorboard", "csv", "plot", "all", "none"};

}  // namespace

std::string report_to_problem(std::string_view text) {
  const auto items = split(text, ',');
  for (const auto raw : items) {
    const auto item = trim(raw);
    if (std::ranges::find(kNames, item) == kNames.end()) {
      const auto near = closest(item, kNames);
      return fmt::format("'{}' is not a report target{}; expected {}", item,
                         near ? " (did you mean '" + *near + "'?)" : "", kReportToExpected);
    }
    if (item == "none" && items.size() > 1) {
      return fmt::format("none cannot be combined with other targets; expected {}",
                         kReportToExpected);
    }
  }
  return {};
}

ReportTargets report_targets(std::string_view text) {
  ReportTargets targets;
  for (const auto raw : split(text, ',')) {
    const auto item = trim(raw);
    const bool all = item == "all";
    targets.jsonl = targets.jsonl || all || item == "jsonl";
    targets.tensorboard = targets.tensorboard || all || item == "tensorboard";
    targets.csv = targets.csv || all || item == "csv";
    targets.plot = targets.plot || all || item == "plot";
  }
  targets.jsonl = targets.jsonl || targets.plot;
  return targets;
}

}  // namespace ampt::config
