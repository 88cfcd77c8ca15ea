// What the model will consume, told to the data layer by its caller: the data layer cuts token
// windows and makes synthetic samples to this request and never asks which model it feeds.
#pragma once

#include <cstdint>

namespace ampt::data {

struct SampleRequest {
  enum class Form {
    features,  // a classifier of feature vectors (any sample shape is flattened)
    images,    // a classifier of images {channels, height, width}
    tokens,    // a language model: windows of block_size token ids below vocab_size
  };
  Form form = Form::features;
  int64_t block_size = 0;  // tokens only
  int64_t vocab_size = 0;  // tokens only
};

}  // namespace ampt::data
