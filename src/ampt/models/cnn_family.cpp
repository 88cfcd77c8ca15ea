// The CNN family: a residual convolutional classifier of images {channels, height, width}.
#include "ampt/models/cnn.h"
#include "ampt/models/family_support.h"
#include "ampt/models/flops.h"
#include "ampt/models/model_family.h"

namespace ampt::models {
namespace {

data::SampleRequest request(const config::Config&) {
  return {data::SampleRequest::Form::images, 0, 0};
}

Model build(const config::Config& config, const data::DataSpec& spec) {
  require_data(spec.task == data::Task::classification && spec.sample_shape.size() == 3, "cnn",
               "classification images of shape {channels, height, width}", spec);
  const auto& shape = spec.sample_shape;
  Cnn cnn(shape[0], shape[1], shape[2], config.cnn_channels, config.cnn_blocks, spec.classes);
  return classifier_model(
      cnn, training_flops_from_macs(cnn->macs_per_sample()),
      fmt::format("input {}x{}x{}, {} stages of {} blocks, channels {}..{}, classes {}", shape[0],
                  shape[1], shape[2], CnnImpl::kStages, config.cnn_blocks, config.cnn_channels,
                  config.cnn_channels << (CnnImpl::kStages - 1), spec.classes));
}

ModelDims memory_dims(const config::Config& config, std::vector<int64_t> input_shape, int64_t) {
  ModelDims d;
  d.family = ModelDims::Family::cnn;
  d.name = config.model;
  d.classes = config.synthetic_classes;
  d.input_shape = input_shape.empty() ? std::vector<int64_t>{3, 32, 32} : std::move(input_shape);
  if (d.input_shape.size() != 3) {
    throw UsageError(fmt::format("model cnn needs an input shape C,H,W; got {} dimensions",
                                 d.input_shape.size()));
  }
  d.cnn_channels = config.cnn_channels;
  d.cnn_blocks = config.cnn_blocks;
  return d;
}

}  // namespace

ModelFamily cnn_family() {
  return {.name = "cnn",
          .presets = {},
          .sample_request = request,
          .build = build,
          .memory_dims = memory_dims,
          .channels_last = true};
}

}  // namespace ampt::models
