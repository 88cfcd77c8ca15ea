#include "ampt/models/model_dims.h"

#include "ampt/config/enum_names.h"
#include "ampt/models/lora_layers.h"
#include "ampt/models/model_family.h"

#include <fmt/format.h>

namespace ampt::models {

std::string_view to_string(Precision precision) {
  switch (precision) {
    case Precision::fp32: return "fp32";
    case Precision::bf16: return "bf16";
    case Precision::fp16: return "fp16";
    case Precision::fp8: return "fp8";
  }
  return "";
}

std::string Scheme::name() const {
  return fmt::format("{}/{}", to_string(precision), config::to_string(opt_level));
}

ModelDims model_dims(const config::Config& config, std::vector<int64_t> input_shape,
                     int64_t seq_len) {
  auto dims = family_of(config).memory_dims(config, std::move(input_shape), seq_len);
  dims.lora = lora_dims(config, dims);
  if (config::samples_completions(config.objective)) {
    const bool grpo_reference = config.objective == config::Objective::grpo && config.beta > 0;
    dims.rollout = {true, config.batch_size * config.grad_accum_steps, config.max_completion_length,
                    grpo_reference && !dims.lora.active()};
  } else if (config.objective != config::Objective::lm) {
    const bool reference = config::needs_reference(config.objective);
    dims.preference = {true, !config.packing,
                       reference && !dims.lora.active() && !config.precompute_ref_logps};
  }
  return dims;
}

}  // namespace ampt::models
