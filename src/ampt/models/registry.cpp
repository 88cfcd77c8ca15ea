#include "ampt/models/registry.h"

#include "ampt/core/errors.h"
#include "ampt/models/mlp.h"

namespace ampt::models {

Model make_model(const config::Config& config, const DataShape& shape) {
  if (config.model == "mlp") {
    Mlp mlp(shape.features, config.mlp_hidden, config.mlp_layers, shape.classes);
    return {mlp.ptr(), [mlp](const torch::Tensor& x) mutable { return mlp->forward(x); }};
  }
  throw UsageError("unknown model '" + config.model + "': expected one of mlp");
}

int64_t parameter_count(const torch::nn::Module& module) {
  int64_t count = 0;
  for (const auto& p : module.parameters()) count += p.numel();
  return count;
}

}  // namespace ampt::models
