// Precision schedules (`fp32:500,bf16:2000,fp16`) and keep_fp32_modules pattern lists: their
// parsing, their checks against the rest of the configuration, and stage lookup by step/epoch.
#pragma once

#include "ampt/config/config.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ampt::config {

class Resolved;

// One stage: `precision` while the step (or epoch) is below `until`; the last stage has no bound.
struct PrecisionStage {
  MixedPrecision precision = MixedPrecision::no;  // no, bf16 or fp16 (never auto)
  int64_t until = -1;        // exclusive bound; -1: unbounded (only the last stage)
  bool until_epoch = false;  // `until` counts epochs, not optimizer steps

  bool operator==(const PrecisionStage&) const = default;
};

// What a precision_schedule value may look like, for --help and error messages.
inline constexpr std::string_view kScheduleExpected =
    "comma-separated PRECISION[:UNTIL] stages, PRECISION one of fp32, bf16, fp16, UNTIL a step "
    "count N or an epoch count Nep, increasing, only the last stage without UNTIL "
    "(e.g. fp32:500,bf16)";

// The stages of `text`; throws std::invalid_argument with the reason ("stage 2 'bf16:100' ends
// at step 100, not after the previous stage's 500") when it is not a valid schedule.
std::vector<PrecisionStage> parse_precision_schedule(std::string_view text);
// The reason `text` is not a schedule, with the allowed forms; empty when it is one, or when
// it is empty (no schedule).
std::string schedule_problem(std::string_view text);

// "fp32:500" / "bf16:2ep" / "fp16": one stage as the schedule text writes it.
std::string stage_text(const PrecisionStage& stage);

// The schedule a run follows: the parsed precision_schedule, or one unbounded stage of
// mixed_precision (which may be auto) when there is none.
std::vector<PrecisionStage> precision_stages(const Config& config);

// The index of the stage that step `step` (0-based, optimizer steps done before it) of epoch
// `epoch` trains in.
std::size_t stage_at(const std::vector<PrecisionStage>& stages, int64_t step, int64_t epoch);

// keep_fp32_modules: comma-separated module-name globs (`*`, `?`), e.g. "wte,ln_*,*.norm".
inline constexpr std::string_view kModulePatternsExpected =
    "comma-separated module-name patterns of letters, digits, '_', '.', '*' and '?' "
    "(e.g. wte,ln_*,head)";
std::vector<std::string> split_module_patterns(std::string_view text);
std::string module_patterns_problem(std::string_view text);  // empty when valid
bool is_module_pattern(std::string_view pattern);  // non-empty, of the characters above

// Cross-setting checks, run once the layers are merged: O2 needs a half precision (or a
// schedule), and a schedule may not contradict an explicitly set mixed_precision (it must name
// the schedule's last stage). Throws UsageError naming both settings and their sources.
void check_precision_settings(const Resolved& resolved);

}  // namespace ampt::config
