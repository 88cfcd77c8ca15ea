#include "ampt/data/tensor_dataset.h"

namespace ampt::data {

TensorDataset::TensorDataset(torch::Tensor inputs, torch::Tensor targets)
    : inputs_(std::move(inputs)), targets_(std::move(targets)) {
  TORCH_CHECK(inputs_.size(0) == targets_.size(0), "TensorDataset: ", inputs_.size(0),
              " inputs but ", targets_.size(0), " targets");
}

Batch TensorDataset::gather(const std::vector<int64_t>& indices) const {
  // from_blob borrows the caller's vector: index_select copies before it goes away.
  const auto index = torch::from_blob(const_cast<int64_t*>(indices.data()),
                                      {static_cast<int64_t>(indices.size())}, torch::kInt64);
  auto inputs = inputs_.index_select(0, index);
  if (inputs.scalar_type() == torch::kUInt8) inputs = inputs.to(torch::kFloat32).div_(255.0);
  return {inputs, targets_.index_select(0, index)};
}

}  // namespace ampt::data
