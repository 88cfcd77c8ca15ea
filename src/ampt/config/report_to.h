// --report_to: where a run writes its logged metrics (rank 0 only), as Hugging Face's
// TrainingArguments.report_to names its integrations.
#pragma once

#include <string>
#include <string_view>

namespace ampt::config {

struct ReportTargets {
  bool jsonl = false;        // metrics.jsonl
  bool tensorboard = false;  // tb/events.out.tfevents.*
  bool csv = false;          // metrics.csv as Lightning's CSVLogger writes it
  bool plot = false;         // run.svg at the end, drawn from metrics.jsonl (so jsonl is on too)
};

inline constexpr std::string_view kReportToExpected =
    "a comma-separated list of jsonl, tensorboard, csv, plot, or all, or none alone "
    "(e.g. jsonl,tensorboard)";

// Why `text` is not a valid report_to value; empty when it is.
std::string report_to_problem(std::string_view text);

// The targets of a valid report_to value.
ReportTargets report_targets(std::string_view text);

}  // namespace ampt::config
