#include "ampt/data/synthetic_images.h"

#include "ampt/data/seed.h"

#include <ATen/CPUGeneratorImpl.h>

namespace ampt::data {

SyntheticImages::SyntheticImages(int64_t samples, int64_t classes, uint64_t seed) : seed_(seed) {
  constexpr int64_t kBlock = 8;
  auto generator = at::detail::createCPUGenerator(seed);
  patterns_ = torch::randn({classes, kChannels, kSide / kBlock, kSide / kBlock}, generator)
                  .repeat_interleave(kBlock, 2)
                  .repeat_interleave(kBlock, 3);
  labels_ = torch::randint(classes, {samples}, generator, torch::kInt64);
}

Batch SyntheticImages::gather(const std::vector<int64_t>& indices) const {
  const auto all_labels = labels_.accessor<int64_t, 1>();
  std::vector<torch::Tensor> images;
  std::vector<int64_t> labels;
  for (const int64_t index : indices) {
    TORCH_CHECK(index >= 0 && index < size(), "synthetic image ", index, " out of range");
    const int64_t label = all_labels[index];
    auto generator = at::detail::createCPUGenerator(mix_seed(seed_, static_cast<uint64_t>(index)));
    const auto noise = torch::randn({kChannels, kSide, kSide}, generator);
    images.push_back((0.5 + 0.2 * (patterns_[label] + noise)).clamp_(0.0, 1.0));
    labels.push_back(label);
  }
  return {torch::stack(images), torch::tensor(labels, torch::kInt64)};
}

}  // namespace ampt::data
