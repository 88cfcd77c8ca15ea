// What the tests of the kernels emulated on the CPU (tests/support/cuda_emulation) share: the
// kernels' name for a dtype, output buffers with guard bytes, and a closeness check.
#pragma once

#include "cuda_emulated/launch.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <string>

namespace ampt::test {

inline kernels::cuda_emulated::Dtype emulated_dtype(c10::ScalarType t) {
  using kernels::cuda_emulated::Dtype;
  if (t == torch::kBFloat16) return Dtype::bfloat16;
  if (t == torch::kHalf) return Dtype::float16;
  return Dtype::float32;
}

// |got - want| ≤ tol + tol·|want| everywhere, want in float64.
inline void check_close(const torch::Tensor& got, const torch::Tensor& want, double tol,
                        const std::string& what) {
  const auto error = (got.to(torch::kFloat64) - want).abs();
  INFO(what << ": max error " << error.max().item<double>() << " (tolerance " << tol << " + "
            << tol << " x |value|)");
  CHECK(torch::all(error <= tol + tol * want.abs()).item<bool>());
}

// An output buffer: a kernel that writes past its end changes the guard bytes after it, where on
// a GPU it would corrupt a neighbouring allocation unseen.
class Guarded {
 public:
  Guarded(std::vector<int64_t> shape, c10::ScalarType dtype, std::string name)
      : shape_(std::move(shape)), dtype_(dtype), name_(std::move(name)) {
    bytes_ = c10::multiply_integers(shape_) * static_cast<int64_t>(c10::elementSize(dtype));
    storage_ = torch::full({bytes_ + kGuardBytes}, kPattern, torch::kUInt8);
  }

  void* data() { return storage_.data_ptr(); }
  template <class T>
  T* data() {
    return static_cast<T*>(data());
  }

  // The buffer as a tensor of its shape and dtype, once its guard is checked.
  torch::Tensor get() const {
    INFO(name_ << ": the bytes after the buffer");
    CHECK(torch::equal(storage_.narrow(0, bytes_, kGuardBytes),
                       torch::full({kGuardBytes}, kPattern, torch::kUInt8)));
    return storage_.narrow(0, 0, bytes_).view(dtype_).view(shape_);
  }

 private:
  static constexpr int64_t kGuardBytes = 256;
  static constexpr int kPattern = 0x5a;
  std::vector<int64_t> shape_;
  c10::ScalarType dtype_;
  std::string name_;
  int64_t bytes_ = 0;
  torch::Tensor storage_;
};

}  // namespace ampt::test
