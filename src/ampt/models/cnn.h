// A small ResNet-style image classifier.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

namespace ampt::models {

// ResNet's basic block: relu(bn(conv3x3(relu(bn(conv3x3(x))))) + shortcut(x)). The shortcut is
// the identity, or a strided 1x1 conv + BN where the block changes width or resolution.
class BasicBlockImpl : public torch::nn::Module {
 public:
  BasicBlockImpl(int64_t in_channels, int64_t out_channels, int64_t stride);
  torch::Tensor forward(const torch::Tensor& x);
  // Weights of all its convolutions: every one of them produces the block's output resolution,
  // so this times the output area is the block's multiply-accumulates per sample.
  int64_t conv_weights() const;

 private:
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  torch::nn::BatchNorm2d bn1_{nullptr}, bn2_{nullptr};
  torch::nn::Sequential shortcut_;  // empty: identity
};
TORCH_MODULE(BasicBlock);

// Stem (3x3 conv, BN, ReLU at full resolution) → three stages of `blocks_per_stage` basic blocks
// with widths c, 2c, 4c, each later stage halving the resolution in its first block (the CIFAR
// ResNet layout) → global average pool → linear head.
class CnnImpl : public torch::nn::Module {
 public:
  static constexpr int64_t kStages = 3;

  CnnImpl(int64_t in_channels, int64_t height, int64_t width, int64_t channels,
          int64_t blocks_per_stage, int64_t classes);
  // x: [B, in_channels, height, width] → logits [B, classes].
  torch::Tensor forward(const torch::Tensor& x);
  // Multiply-accumulates of the convolutions and the head in one sample's forward pass.
  int64_t macs_per_sample() const { return macs_; }

 private:
  torch::nn::Conv2d stem_conv_{nullptr};
  torch::nn::BatchNorm2d stem_bn_{nullptr};
  torch::nn::Sequential blocks_;
  torch::nn::Linear head_{nullptr};
  int64_t macs_ = 0;
};
TORCH_MODULE(Cnn);

}  // namespace ampt::models
