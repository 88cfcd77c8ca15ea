// The MLP family: a classifier of feature vectors (any sample shape, flattened).
#include "ampt/models/family_support.h"
#include "ampt/models/flops.h"
#include "ampt/models/mlp.h"
#include "ampt/models/model_family.h"

#include <numeric>

namespace ampt::models {
namespace {

data::SampleRequest request(const config::Config&) {
  return {data::SampleRequest::Form::features, 0, 0};
}

Model build(const config::Config& config, const data::DataSpec& spec) {
  require_data(spec.task == data::Task::classification && !spec.sample_shape.empty(), "mlp",
               "classification samples", spec);
  const int64_t features = std::accumulate(spec.sample_shape.begin(), spec.sample_shape.end(),
                                           int64_t{1}, std::multiplies<>());
  Mlp mlp(features, config.mlp_hidden, config.mlp_layers, spec.classes);
  return classifier_model(mlp, training_flops_from_macs(mlp->macs_per_sample()),
                          fmt::format("in {}, hidden {} x {} layers, classes {}", features,
                                      config.mlp_hidden, config.mlp_layers, spec.classes));
}

ModelDims memory_dims(const config::Config& config, std::vector<int64_t> input_shape, int64_t) {
  ModelDims d;
  d.family = ModelDims::Family::mlp;
  d.name = config.model;
  d.classes = config.synthetic_classes;
  d.input_shape = input_shape.empty() ? std::vector<int64_t>{config.synthetic_features}
                                      : std::move(input_shape);
  d.mlp_hidden = config.mlp_hidden;
  d.mlp_layers = config.mlp_layers;
  return d;
}

}  // namespace

ModelFamily mlp_family() {
  return {.name = "mlp",
          .presets = {},
          .sample_request = request,
          .build = build,
          .memory_dims = memory_dims};
}

}  // namespace ampt::models
