#include "ampt/precision/policy.h"

#include <fmt/format.h>

namespace ampt::precision {

using config::MixedPrecision;
using config::OptLevel;

PrecisionPolicy make_policy(MixedPrecision requested, OptLevel opt_level) {
  PrecisionPolicy policy;
  policy.requested = requested;
  policy.opt_level = opt_level;
  // O0 is the fp32 baseline whatever precision was asked for: the AMP machinery (inf checks,
  // statistics, logs) still runs so the two can be compared line by line.
  if (opt_level == OptLevel::O0 || requested == MixedPrecision::no) return policy;
  policy.autocast = true;
  // fp8 runs the transformer's Linear layers in fp8 (precision/fp8_linear.h) and the rest in bf16.
  policy.compute_dtype = requested == MixedPrecision::fp16 ? c10::kHalf : c10::kBFloat16;
  policy.fp8 = requested == MixedPrecision::fp8;
  policy.loss_scaling = requested == MixedPrecision::fp16;
  // fp8 keeps fp32 weights (its Linear layers cast per call): O2's half weights are for bf16/fp16.
  if (opt_level == OptLevel::O2 && !policy.fp8) policy.weight_dtype = policy.compute_dtype;
  return policy;
}

std::string PrecisionPolicy::name() const {
  if (!autocast) return "FP32";
  if (fp8) return "FP8";
  return compute_dtype == c10::kBFloat16 ? "BF16" : "FP16";
}

std::string PrecisionPolicy::explanation() const {
  if (opt_level == OptLevel::O0) {
    return requested == MixedPrecision::no
               ? "fp32 everywhere, AMP statistics active"
               : "fp32 everywhere (the fp32 baseline for the requested precision), AMP "
                 "statistics active";
  }
  if (!autocast) {
    return opt_level == OptLevel::O2
               ? "fp32 weights (the O2 masters themselves), activations and gradients"
               : "mixed precision off: fp32 weights, activations and gradients";
  }
  if (opt_level == OptLevel::O2 && !fp8) {
    const char* half = compute_dtype == c10::kBFloat16 ? "bf16" : "fp16";
    return fmt::format(
        "{0} weights, activations and gradients; BatchNorm/LayerNorm and keep_fp32_modules in "
        "fp32; fp32 master weights stepped by the optimizer; autocast still runs losses in "
        "fp32{1}",
        half,
        loss_scaling ? "; dynamic loss scaling because fp16's range ends at 65504"
                     : "; no loss scaling because bf16 has fp32's exponent range");
  }
  if (fp8) {
    return "fp32 weights; the Linear layers --fp8_layers picks (listed under [PERF]) in fp8 "
           "(e4m3 forward, e5m2 gradients), everything else autocast to bf16; no loss scaling";
  }
  if (loss_scaling) {
    return "fp32 weights; matmuls and convolutions autocast to fp16, softmax, norms "
           "and losses in fp32; dynamic loss scaling because fp16's range ends at 65504";
  }
  return "fp32 weights; matmuls and convolutions autocast to bf16, softmax, norms "
         "and losses in fp32; no loss scaling because bf16 has fp32's exponent range";
}

}  // namespace ampt::precision
