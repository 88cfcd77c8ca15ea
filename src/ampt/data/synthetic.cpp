#include "ampt/data/synthetic.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

namespace ampt::data {

SyntheticClassification::SyntheticClassification(int64_t samples, int64_t features_,
                                                 int64_t classes_, uint64_t seed)
    : features(features_), classes(classes_) {
  constexpr int64_t kTeacherWidth = 64;
  auto generator = at::detail::createCPUGenerator(seed);
  const auto f32 = torch::dtype(torch::kFloat32);
  inputs = torch::randn({samples, features}, generator, f32);
  const auto w1 = torch::randn({features, kTeacherWidth}, generator, f32) / std::sqrt(features);
  const auto w2 = torch::randn({kTeacherWidth, classes}, generator, f32);
  targets = torch::tanh(inputs.matmul(w1)).matmul(w2).argmax(1);
}

}  // namespace ampt::data
