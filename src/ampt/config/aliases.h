// Names other tools give ampt's settings (DeepSpeed's loss_scale_window, initial_scale_power and
// zero_optimization.stage, Accelerate's scaler_enabled, SEDD's gradient_clip, NeMo-RL's
// policy.precision, Onyx's mixed_precision_config) and names ampt itself used before
// (allreduce_dtype), accepted as flags, environment variables and YAML keys and turned into an
// assignment of the canonical option, so `ampt config` shows the canonical setting and where it
// came from.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ampt/config/enum_names.h"
#include "ampt/config/readers.h"

namespace ampt::config {

struct Alias {
  std::string name;    // the flag without "--", and the YAML key
  std::string target;  // the canonical option's name
  // YAML sections where the key is accepted besides the top level ("scaler").
  std::vector<std::string> sections;
  // Converts the alias's text into text the target accepts; nullopt when invalid. Empty for a
  // plain synonym.
  std::optional<std::string> (*translate)(std::string_view text) = nullptr;
  std::string expected;  // what a valid value looks like, when translate is set
  // Only a key inside its sections (DeepSpeed's zero_optimization: {stage: 2}): no flag, no
  // environment variable, no top-level key, where the bare name would mean nothing.
  bool nested_only = false;
};

const std::vector<Alias>& aliases();

// Precision names of torch, Hugging Face, Lightning and NeMo-RL configs. Lightning's
// "16-true"/"bf16-true" mean pure low-precision weights, not autocast, so they are absent.
inline constexpr Spellings<MixedPrecision, 11> kPrecisionNames{
    {{"float32", MixedPrecision::no},
     {"float16", MixedPrecision::fp16},
     {"bfloat16", MixedPrecision::bf16},
     {"fp32", MixedPrecision::no},
     {"fp16", MixedPrecision::fp16},
     {"bf16", MixedPrecision::bf16},
     {"32", MixedPrecision::no},
     {"32-true", MixedPrecision::no},
     {"16", MixedPrecision::fp16},
     {"16-mixed", MixedPrecision::fp16},
     {"bf16-mixed", MixedPrecision::bf16}}};

// torch.autocast's dtype argument as configs and scripts write it.
inline constexpr Spellings<MixedPrecision, 4> kAutocastDtypes{{{"bfloat16", MixedPrecision::bf16},
                                                               {"float16", MixedPrecision::fp16},
                                                               {"bf16", MixedPrecision::bf16},
                                                               {"fp16", MixedPrecision::fp16}}};

// torch.autocast's two settings as SEDD's flags and keys (use_amp, amp_dtype), the amp: section
// (enabled, dtype) and Onyx's mixed_precision_config write them: amp_dtype alone turns AMP on in
// that dtype, use_amp alone means fp16 (autocast's CUDA default), and use_amp false wins over
// any dtype. The precision they make, and whether amp_dtype decided it; nullopt for neither.
struct AutocastChoice {
  MixedPrecision precision;
  bool by_dtype;
};
std::optional<AutocastChoice> autocast_choice(std::optional<bool> use_amp,
                                              std::optional<MixedPrecision> amp_dtype);

// The mixed_precision assignment of the pair where a source that gives settings one by one (the
// flags, the environment) gave use_amp, amp_dtype or both: each one's text and where it was
// written. UsageError for a value that is not a boolean or a dtype.
// The pair's flag names, and with AMPT_ in capitals its environment variables.
inline constexpr std::array<const char*, 2> kAutocastNames{"use_amp", "amp_dtype"};
using Written = std::pair<std::string, Source>;
std::optional<Assignment> autocast_assignment(const std::optional<Written>& use_amp,
                                              const std::optional<Written>& amp_dtype);

// The sections aliases live in that no option has ("zero_optimization").
const std::vector<std::string>& alias_only_sections();

// The alias `key` names in `section` ("" = top level), or nullptr.
const Alias* find_alias(std::string_view key, std::string_view section);

// The alias as an assignment of its target option; UsageError naming the alias and `source`
// when translate rejects the text.
Assignment alias_assignment(const Alias& alias, std::string_view text, const Source& source);

}  // namespace ampt::config
