// `ampt compare`: the same configuration trained for N steps in each numeric format (fp32, bf16,
// fp16, ...) from the same initial weights and data order, summarised in one table.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ampt::train {

// A format compare can run: its name in --formats and the --mixed_precision a training run gets.
// New formats (fp8) are one more entry in compare_formats().
struct CompareFormat {
  std::string name;
  std::string mixed_precision;
};
const std::vector<CompareFormat>& compare_formats();

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

// ok, "N overflows", diverged, "stopped at step K" or "failed: ..." (README, `ampt compare`).
std::string stability(const FormatResult& result, int64_t requested_steps);

std::string compare_markdown(const CompareReport& report);
std::string compare_csv(const CompareReport& report);
std::string compare_json(const CompareReport& report);

// Reads a run's summary.json; nullopt when the file does not exist.
std::optional<FormatResult> read_summary(const std::string& format, const std::string& output_dir);

std::string compare_help();

// `args` after `compare`; `env` the process environment (only AMPT_* is read, by config). Runs one
// child `ampt train` per format, prints the table and writes compare.{md,csv,json} to output_dir.
// Returns the exit status: 0, or 1 when a format's run failed (its row says why). Throws
// UsageError for bad flags before anything runs.
int run_compare(const std::vector<std::string>& args,
                const std::map<std::string, std::string>& env);

}  // namespace ampt::train
