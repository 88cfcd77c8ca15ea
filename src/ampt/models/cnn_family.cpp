// The CNN family: a residual convolutional classifier of images {channels, height, width}.
#include "ampt/models/cnn.h"
#include "ampt/models/family_support.h"
#include "ampt/models/flops.h"
#include "ampt/models/memory_terms.h"
#include "ampt/models/model_family.h"

namespace ampt::models {
namespace {

data::SampleRequest cnn_request(const config::Config&) {
  return {data::SampleRequest::Form::images, 0, 0};
}

Model cnn_build(const config::Config& config, const data::DataSpec& spec) {
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

// Elements of one sample's feature maps that the CNN keeps for backward: two per conv-BN-ReLU
// (BN's input, ReLU's output) and per basic block four (conv1/BN1 input, ReLU, conv2/BN2
// input, the block's ReLU output) plus one for a projection shortcut's conv output.
int64_t cnn_saved_elements(const ModelDims& d, int64_t channels, int64_t blocks_per_stage) {
  int64_t height = d.input_shape[1], width = d.input_shape[2];
  const auto strided = [](int64_t length, int64_t stride) { return (length - 1) / stride + 1; };
  int64_t elements = 2 * channels * height * width;
  int64_t in = channels;
  for (int64_t stage = 0; stage < 3; ++stage) {
    const int64_t out = channels << stage;
    for (int64_t i = 0; i < blocks_per_stage; ++i) {
      const int64_t stride = stage > 0 && i == 0 ? 2 : 1;
      height = strided(height, stride);
      width = strided(width, stride);
      const bool projection = stride != 1 || (i == 0 ? in : out) != out;
      elements += (projection ? 5 : 4) * out * height * width;
    }
    in = out;
  }
  return elements;
}

int64_t cnn_activations(const ModelDims& d, const Scheme& s, int64_t b, int64_t channels,
                        int64_t blocks_per_stage) {
  const auto [r, h] = widths(s);
  return b * product(d.input_shape) * h +
         b * cnn_saved_elements(d, channels, blocks_per_stage) * h +
         b * d.classes * kLossBytesPerLogit + b * 8;
}

ModelDims cnn_memory_dims(const config::Config& config, std::vector<int64_t> input_shape, int64_t) {
  ModelDims d;
  d.name = config.model;
  d.classes = config.synthetic_classes;
  d.input_shape = input_shape.empty() ? std::vector<int64_t>{3, 32, 32} : std::move(input_shape);
  if (d.input_shape.size() != 3) {
    throw UsageError(fmt::format("model cnn needs an input shape C,H,W; got {} dimensions",
                                 d.input_shape.size()));
  }
  const int64_t c = config.cnn_channels, blocks = config.cnn_blocks;
  auto& t = d.terms;
  t.description = fmt::format("input {}, channels {}, {} blocks per stage, classes {}",
                              fmt::join(d.input_shape, "x"), c, blocks, d.classes);
  // The stem's 3x3 convolution and BatchNorm, each block's two (and a projection's 1x1 with its
  // BatchNorm), the classifier.
  int64_t matmul = 9 * d.input_shape[0] * c, norm = 2 * c;
  int64_t in = c;
  for (int64_t stage = 0; stage < 3; ++stage) {
    const int64_t out = c << stage;
    for (int64_t i = 0; i < blocks; ++i) {
      const int64_t block_in = i == 0 ? in : out;
      const bool projection = (stage > 0 && i == 0) || block_in != out;
      matmul += 9 * block_in * out + 9 * out * out + (projection ? block_in * out : 0);
      norm += (projection ? 3 : 2) * 2 * out;
    }
    in = out;
  }
  matmul += in * d.classes;
  t.other_matmul_weights = matmul;
  t.norm = norm;
  t.parameters = matmul + norm + d.classes;
  t.activations = [c, blocks](const ModelDims& dims, const Scheme& s, int64_t b, bool) {
    return cnn_activations(dims, s, b, c, blocks);
  };
  return d;
}

}  // namespace

ModelFamily cnn_family() {
  return {.name = "cnn",
          .presets = {},
          .sample_request = cnn_request,
          .build = cnn_build,
          .memory_dims = cnn_memory_dims,
          .channels_last = true};
}

}  // namespace ampt::models
