#include "ampt/data/batch.h"

#include <vector>

namespace ampt::data {

torch::Tensor sequence_starts(const torch::Tensor& positions) {
  const auto flat = positions.contiguous().view(-1);
  const int64_t* at = flat.data_ptr<int64_t>();
  std::vector<int32_t> starts;
  for (int64_t i = 0; i < flat.numel(); ++i) {
    if (at[i] == 0) starts.push_back(static_cast<int32_t>(i));
  }
  starts.push_back(static_cast<int32_t>(flat.numel()));
  return torch::tensor(starts, torch::kInt32);
}

}  // namespace ampt::data
