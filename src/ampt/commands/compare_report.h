// The table `ampt compare` prints and writes: each format's run (read back from its summary.json)
// against the baseline, as Markdown, CSV and JSON.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ampt::commands {

// One format's run, read from its summary.json (or why there is none).
struct FormatResult {
  std::string format;
  std::string output_dir;
  std::string error;          // non-empty: the run failed before writing a summary
  int64_t steps = 0;          // optimizer steps done
  double initial_loss = 0.0;  // NaN when not finite
  double final_loss = 0.0;
  double final_val_loss = -1.0;
  int64_t skipped_steps = 0;
  double samples_per_sec = 0.0;
  double tokens_per_sec = 0.0;
  double seconds = 0.0;
  int64_t peak_memory_bytes = 0;
  std::string peak_memory_kind;
};

struct CompareReport {
  int64_t steps = 0;            // requested per format
  bool language_model = false;  // throughput in tokens/s rather than samples/s
  std::string baseline;         // fp32 when it ran, else the first format
  std::vector<FormatResult> results;
};

// The baseline format's result when its run succeeded, else nullptr.
const FormatResult* baseline_of(const CompareReport& report);

// ok, "N overflows", diverged, "stopped at step K" or "failed: ..." (docs/precision.md, `ampt compare`).
std::string stability(const FormatResult& result, int64_t requested_steps);

std::string compare_markdown(const CompareReport& report);
std::string compare_csv(const CompareReport& report);
std::string compare_json(const CompareReport& report);

// Reads a run's summary.json; nullopt when the file does not exist.
std::optional<FormatResult> read_summary(const std::string& format, const std::string& output_dir);

}  // namespace ampt::commands
