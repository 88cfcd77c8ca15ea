// The comparison behind the fused paths' self-checks (kernels/self_check.h), on the CPU; the
// self-checks themselves, and kernel_support's verdicts with the real probes, on a GPU.
#include "ampt/core/errors.h"
#include "ampt/kernels/kernel_support.h"
#include "ampt/kernels/self_check.h"
#include "support/skip.h"

#include <ATen/cuda/CUDAContext.h>
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <cmath>

using ampt::kernels::require_close;

TEST_CASE("self-check comparison: norm-wise relative error, and an error naming what differs",
          "[kernels][self_check]") {
  const auto want = torch::tensor({3.0, 4.0});
  CHECK(require_close("x", want, want, 1e-6) == 0.0);
  CHECK(require_close("x", torch::tensor({3.0, 4.05}), want, 0.02) == Approx(0.01));
  CHECK(require_close("zeros", torch::zeros({2}), torch::zeros({2}), 0.0) == 0.0);
  CHECK_THROWS_WITH(require_close("normed", torch::tensor({3.0, 5.0}), want, 0.03),
                    "normed: relative error 0.2 against ATen, more than the 3e-02 its arithmetic "
                    "explains");
  CHECK_THROWS_WITH(require_close("sum", torch::tensor({3.0, std::nan("")}), want, 1.0),
                    "sum: non-finite values where ATen's are finite");
  CHECK_THROWS_WITH(require_close("grad", torch::zeros({3}), want, 1.0),
                    "grad: shape 3 where ATen gives 2");
}

TEST_CASE("a c10 error is reported by its message's first line, without its backtrace",
          "[kernels][self_check][errors]") {
  try {
    TORCH_CHECK(false, "expected scalar type BFloat16 but found Float");
    FAIL("TORCH_CHECK threw nothing");
  } catch (const c10::Error& error) {
    CHECK_THAT(std::string(error.what()), Catch::Contains("Exception raised from"));
    CHECK(ampt::message_of(error) == "expected scalar type BFloat16 but found Float");
  }
}

TEST_CASE("kernel support on this GPU: every path its capability allows runs and passes its "
          "self-check",
          "[kernels][self_check][cuda]") {
  if (!torch::cuda::is_available()) {
    AMPT_SKIP(gpu, "no CUDA device: the self-checks need one");
  }
  using ampt::kernels::FusedPath;
  const c10::Device gpu(c10::kCUDA, 0);
  const auto* properties = at::cuda::getDeviceProperties(0);
  const int capability = properties->major * 10 + properties->minor;
  auto& support = ampt::kernels::kernel_support();
  for (const auto path : ampt::kernels::kFusedPaths) {
    const auto status = support.status(path, gpu);
    const bool fp8 = path == FusedPath::fp8_casts || path == FusedPath::fp8_gemm ||
                     path == FusedPath::fp8_rowwise_gemm;
    INFO(ampt::kernels::path_name(path) << ": " << status.image << status.reason << "; "
                                        << status.check);
    CHECK(status.runs == (!fp8 || capability >= 89));
    if (status.runs) CHECK_THAT(status.check, Catch::StartsWith("max relative error"));
  }
  CHECK(support.take_warnings().empty());
}
