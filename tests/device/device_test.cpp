// The device a run trains on: a GPU LibTorch cannot compute on is named with its capability and
// the oldest this LibTorch runs, in one line.
#include "ampt/device/device.h"

#include <catch2/catch.hpp>
#include <torch/version.h>

TEST_CASE("device: a GPU older than LibTorch's oldest is named with both capabilities",
          "[device]") {
  CHECK(ampt::device::unsupported_gpu(0, "Tesla V100-SXM2-32GB", 7, 0) ==
        std::string("cuda:0 (Tesla V100-SXM2-32GB) has compute capability 7.0, and this LibTorch (") +
            TORCH_VERSION + ") runs GPUs of compute capability 7.5 (Turing) and newer");
}

// Tests not tagged [cuda] see no GPU (support/catch_main.cpp), whatever the machine has.
TEST_CASE("device: without a GPU, auto trains on the CPU and an explicit cuda is an error",
          "[device]") {
  const auto choice = ampt::device::select_device(ampt::config::DeviceKind::auto_select);
  CHECK(choice.device.is_cpu());
  CHECK(choice.warning.empty());
  CHECK_THROWS_WITH(ampt::device::select_device(ampt::config::DeviceKind::cuda),
                    Catch::Contains("no CUDA device is available; use --device cpu or auto"));
}
