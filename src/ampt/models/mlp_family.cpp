// The MLP family: a classifier of feature vectors (any sample shape, flattened).
#include "ampt/models/family_support.h"
#include "ampt/models/flops.h"
#include "ampt/models/mlp.h"
#include "ampt/models/memory_terms.h"
#include "ampt/models/model_family.h"

#include <numeric>

namespace ampt::models {
namespace {

data::SampleRequest mlp_request(const config::Config&) {
  return {data::SampleRequest::Form::features, 0, 0};
}

Model mlp_build(const config::Config& config, const data::DataSpec& spec) {
  require_data(spec.task == data::Task::classification && !spec.sample_shape.empty(), "mlp",
               "classification samples", spec);
  const int64_t features = std::accumulate(spec.sample_shape.begin(), spec.sample_shape.end(),
                                           int64_t{1}, std::multiplies<>());
  Mlp mlp(features, config.mlp_hidden, config.mlp_layers, spec.classes);
  return classifier_model(mlp, training_flops_from_macs(mlp->macs_per_sample()),
                          fmt::format("in {}, hidden {} x {} layers, classes {}", features,
                                      config.mlp_hidden, config.mlp_layers, spec.classes));
}

// The input as the first matmul sees it, then per layer the pre-GELU output (kept by GELU) and
// GELU's output (kept by the next matmul); the loss's transient per logit, the int64 targets.
int64_t mlp_activations(const ModelDims& d, const Scheme& s, int64_t b, int64_t hidden,
                        int64_t layers) {
  const auto [r, h] = widths(s);
  // The input as the first matmul sees it, then per layer the pre-GELU output (kept by GELU)
  // and GELU's output (kept by the next matmul).
  return b * product(d.input_shape) * h + layers * 2 * b * hidden * h +
         b * d.classes * kLossBytesPerLogit + b * 8;
}

ModelDims mlp_memory_dims(const config::Config& config, std::vector<int64_t> input_shape, int64_t) {
  ModelDims d;
  d.name = config.model;
  d.classes = config.synthetic_classes;
  d.input_shape = input_shape.empty() ? std::vector<int64_t>{config.synthetic_features}
                                      : std::move(input_shape);
  const int64_t hidden = config.mlp_hidden, layers = config.mlp_layers;
  auto& t = d.terms;
  t.description = fmt::format("input {}, hidden {} x {} layers, classes {}",
                              fmt::join(d.input_shape, "x"), hidden, layers, d.classes);
  int64_t width = product(d.input_shape);
  for (int64_t i = 0; i < layers; ++i) {
    t.other_matmul_weights += width * hidden;
    t.parameters += width * hidden + hidden;
    width = hidden;
  }
  t.other_matmul_weights += width * d.classes;
  t.parameters += width * d.classes + d.classes;
  t.activations = [hidden, layers](const ModelDims& dims, const Scheme& s, int64_t b, bool) {
    return mlp_activations(dims, s, b, hidden, layers);
  };
  return d;
}

}  // namespace

ModelFamily mlp_family() {
  return {.name = "mlp",
          .presets = {},
          .sample_request = mlp_request,
          .build = mlp_build,
          .memory_dims = mlp_memory_dims};
}

}  // namespace ampt::models
