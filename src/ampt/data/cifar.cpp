#include "ampt/data/cifar.h"

#include "ampt/core/errors.h"
#include "ampt/core/mapped_file.h"

#include <fmt/format.h>

namespace ampt::data {

Batch read_cifar_batches(const std::vector<std::string>& paths) {
  std::vector<torch::Tensor> inputs, targets;
  for (const std::string& path : paths) {
    const MappedFile file(path);
    const auto bytes = static_cast<int64_t>(file.size());
    if (bytes % kCifarRecord != 0) {
      throw RuntimeError(fmt::format(
          "{}: {} bytes is not a whole number of {}-byte records (1 label + 3x32x32 pixels)", path,
          bytes, kCifarRecord));
    }
    const int64_t n = bytes / kCifarRecord;
    // clone: the records are copied out before the mapping closes.
    const auto records =
        torch::from_blob(const_cast<uint8_t*>(file.data()), {n, kCifarRecord}, torch::kUInt8)
            .clone();
    const auto labels = records.select(1, 0).to(torch::kInt64);
    if (const int64_t largest = labels.max().item<int64_t>(); largest >= 10) {
      throw RuntimeError(fmt::format("{}: label {} in a CIFAR-10 record (labels are 0..9)", path,
                                     largest));
    }
    inputs.push_back(records.narrow(1, 1, kCifarPixels).reshape({n, 3, 32, 32}));
    targets.push_back(labels);
  }
  return {torch::cat(inputs), torch::cat(targets)};
}

}  // namespace ampt::data
