#include "ampt/models/cnn.h"

#include "ampt/precision/precision_islands.h"
#include <torch/nn/init.h>

namespace ampt::models {

// The fp32-island hooks every submodule call goes through (precision/precision_islands.h).
using precision::call;
using precision::call_sequence;

namespace {

// Without bias: the BatchNorm that follows every conv has its own shift.
torch::nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  return torch::nn::Conv2d(
      torch::nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

// The output length of a 3x3/pad-1 or 1x1/pad-0 conv with this stride.
int64_t strided(int64_t length, int64_t stride) { return (length - 1) / stride + 1; }

}  // namespace

BasicBlockImpl::BasicBlockImpl(int64_t in_channels, int64_t out_channels, int64_t stride) {
  conv1_ = register_module("conv1", conv(in_channels, out_channels, 3, stride));
  bn1_ = register_module("bn1", torch::nn::BatchNorm2d(out_channels));
  conv2_ = register_module("conv2", conv(out_channels, out_channels, 3, 1));
  bn2_ = register_module("bn2", torch::nn::BatchNorm2d(out_channels));
  if (stride != 1 || in_channels != out_channels) {
    shortcut_->push_back(conv(in_channels, out_channels, 1, stride));
    shortcut_->push_back(torch::nn::BatchNorm2d(out_channels));
  }
  register_module("shortcut", shortcut_);
}

torch::Tensor BasicBlockImpl::forward(const torch::Tensor& x) {
  const auto h = call(bn2_, call(conv2_, torch::relu(call(bn1_, call(conv1_, x)))));
  return torch::relu(h + (shortcut_->is_empty() ? x : call_sequence(shortcut_, x)));
}

int64_t BasicBlockImpl::conv_weights() const {
  int64_t count = conv1_->weight.numel() + conv2_->weight.numel();
  if (!shortcut_->is_empty()) count += shortcut_->ptr(0)->as<torch::nn::Conv2d>()->weight.numel();
  return count;
}

CnnImpl::CnnImpl(int64_t in_channels, int64_t height, int64_t width, int64_t channels,
                 int64_t blocks_per_stage, int64_t classes) {
  stem_conv_ = register_module("stem_conv", conv(in_channels, channels, 3, 1));
  stem_bn_ = register_module("stem_bn", torch::nn::BatchNorm2d(channels));
  macs_ = stem_conv_->weight.numel() * height * width;

  int64_t stage_in = channels;
  for (int64_t stage = 0; stage < kStages; ++stage) {
    const int64_t stage_out = channels << stage;
    for (int64_t i = 0; i < blocks_per_stage; ++i) {
      const int64_t stride = stage > 0 && i == 0 ? 2 : 1;
      height = strided(height, stride);
      width = strided(width, stride);
      BasicBlock block(i == 0 ? stage_in : stage_out, stage_out, stride);
      macs_ += block->conv_weights() * height * width;
      blocks_->push_back(block);
    }
    stage_in = stage_out;
  }
  register_module("blocks", blocks_);
  head_ = register_module("head", torch::nn::Linear(stage_in, classes));
  macs_ += head_->weight.numel();

  // torchvision's ResNet init: He-normal for convs (fan_out keeps the backward pass's gradient
  // variance steady through ReLUs); BatchNorm keeps its defaults (weight 1, bias 0), the head
  // PyTorch's default.
  torch::NoGradGuard no_grad;
  for (auto& module : modules(/*include_self=*/false)) {
    if (auto* c = module->as<torch::nn::Conv2d>()) {
      torch::nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanOut, torch::kReLU);
    }
  }
}

torch::Tensor CnnImpl::forward(const torch::Tensor& x) {
  const auto features = call_sequence(blocks_, torch::relu(call(stem_bn_, call(stem_conv_, x))));
  return call(head_, features.mean({2, 3}));  // global average pool
}

}  // namespace ampt::models
