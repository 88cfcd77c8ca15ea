// The startup report for half-precision runs (O2, fp16): which modules stay fp32 and why, and
// which operations of this particular model are known to be fragile in the half dtype.
#pragma once

#include "ampt/models/registry.h"
#include "ampt/precision/precision_islands.h"
#include "ampt/precision/policy.h"

#include <torch/nn/module.h>

#include <string>
#include <vector>

namespace ampt::models {

// Whether a run with these policies gets the report: any O2 half stage or any fp16 stage.
bool wants_compat_report(const std::vector<precision::PrecisionPolicy>& stages);

// One line per finding, derived from the model's module tree (module types and sizes) and, for a
// transformer, its layer inventory (blocks, width, vocabulary), the islands the run keeps in fp32
// and the half dtype of `policy` (the riskiest stage's policy).
std::vector<std::string> compat_report(const Model& model,
                                       const precision::PrecisionIslands& islands,
                                       const precision::PrecisionPolicy& policy);

}  // namespace ampt::models
