// Which image of each kernel file a GPU runs, and what kernel_support makes of it, on the
// emulated device with faked compute capabilities: the emulation loads the images of the build's
// own architecture lists (CMakeLists.txt) the way CUDA's loader does, so each GPU generation sees
// here what it would see on the machine, and a kernel without an image fails to launch as on a
// GPU.
#include "ampt/kernels/fp8_quantize.h"
#include "ampt/kernels/kernel_support.h"

#include "cuda_emulated/launch.h"
#include "kernels/cuda/kernel_checks.h"
#include "support/cuda_emulation/emulated_device.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <map>
#include <string>

using ampt::kernels::FusedPath;
using ampt::kernels::image_status;
using ampt::kernels::KernelSupport;
using ampt::kernels::PathProbe;
using ampt::kernels::PathStatus;
namespace emulated = ampt::kernels::cuda_emulated;

namespace {

// The emulated kernels' images are the same type as the GPU's (kernel_abi.h).
PathStatus softmax() { return image_status(emulated::softmax_cross_entropy_image(), ""); }
PathStatus add_norm() { return image_status(emulated::add_layer_norm_image(), ""); }
PathStatus fp8() { return image_status(emulated::fp8_quantize_image(), "fp8"); }

// kernel_support over the emulated kernels' images, with self-checks that pass.
KernelSupport emulated_support() {
  const auto passes = [](const c10::Device&) { return std::string("max relative error 0"); };
  return KernelSupport(
      {{FusedPath::softmax_cross_entropy, {[](const c10::Device&) { return softmax(); }, passes}},
       {FusedPath::add_layer_norm, {[](const c10::Device&) { return add_norm(); }, passes}},
       {FusedPath::fp8_casts, {[](const c10::Device&) { return fp8(); }, passes}}},
      [](const c10::Device& d) { return d.str() + " (emulated)"; });
}

const c10::Device kGpu(c10::kCUDA, 0);

}  // namespace

TEST_CASE("kernel images: each GPU generation runs its own binary, or the newest PTX, or none",
          "[kernels][emulated][capability]") {
  struct Case {
    int capability;
    std::string kernels;  // softmax and add+LayerNorm: the image, or "" for none
    std::string fp8;      // the fp8 casts
  };
  const Case cases[] = {
      {70, "", ""},  // Volta: older than any image (and than LibTorch's)
      {75, "sm_75 binary", ""},
      {80, "sm_80 binary", ""},
      {86, "sm_86 binary", ""},
      {87, "sm_86 binary", ""},  // Orin: its major's binary with the highest minor below
      {89, "sm_89 binary", "sm_89 binary"},
      {90, "sm_90 binary", "sm_90 binary"},
      {103, "sm_100 binary", "sm_100 binary"},
      {110, "", ""},  // Thor: no binary of major 11, and the PTX (12.0) is newer
      {121, "sm_120 binary", "sm_120 binary"},
      {130, "compute_120 PTX compiled for 13.0", "compute_120 PTX compiled for 13.0"},
  };
  for (const auto& c : cases) {
    INFO("compute capability " << c.capability);
    const emu::FakedCapability faked(c.capability);
    for (const auto& status : {softmax(), add_norm()}) {
      CHECK(status.runs == !c.kernels.empty());
      CHECK(status.image == c.kernels);
    }
    const auto f = fp8();
    CHECK(f.runs == !c.fp8.empty());
    CHECK(f.image == c.fp8);
  }
}

TEST_CASE("kernel images: why a path does not run names the capability and what it lacks",
          "[kernels][emulated][capability]") {
  {
    const emu::FakedCapability ampere(86);
    CHECK(fp8().reason == "fp8 needs compute capability 8.9 or newer, this GPU has 8.6");
  }
  const emu::FakedCapability volta(70);
  CHECK(softmax().reason ==
        "this build has no image for compute capability 7.0 (no kernel image is available for "
        "execution on the device)");
}

TEST_CASE("kernel images: a kernel without an image fails to launch, as on a GPU",
          "[kernels][emulated][capability]") {
  const auto x = torch::randn({64, 64});
  const auto amaxes = torch::zeros({128}, torch::kInt32);
  auto* bits = reinterpret_cast<uint32_t*>(amaxes.data_ptr<int32_t>());
  {
    const emu::FakedCapability ampere(86);
    CHECK_THROWS_WITH(emulated::fp8_rowwise_amax(x.data_ptr(), emulated::Dtype::float32, 64, 64,
                                                 bits, bits + 64, nullptr),
                      Catch::Contains("fp8_rowwise_amax kernel launch: no kernel image is "
                                      "available for execution on the device"));
  }
  // Ada's sm_89 binary runs it: the same amaxes as ATen's.
  const emu::FakedCapability ada(89);
  emulated::fp8_rowwise_amax(x.data_ptr(), emulated::Dtype::float32, 64, 64, bits, bits + 64,
                             nullptr);
  const auto row_amax = amaxes.narrow(0, 0, 64).view(torch::kFloat32);
  CHECK(torch::equal(row_amax, x.abs().amax(1)));
}

TEST_CASE("kernel support: on an RTX 30xx (8.6) the fused kernels run their sm_86 binaries and "
          "fp8's casts fall back, in one line",
          "[kernels][emulated][capability]") {
  const emu::FakedCapability ampere(86);
  auto support = emulated_support();
  CHECK(support.runs(FusedPath::softmax_cross_entropy, kGpu));
  CHECK(support.runs(FusedPath::add_layer_norm, kGpu));
  CHECK_FALSE(support.runs(FusedPath::fp8_casts, kGpu));
  CHECK(support.summary(kGpu, {FusedPath::softmax_cross_entropy, FusedPath::add_layer_norm,
                               FusedPath::fp8_casts}) ==
        "softmax+loss kernel (sm_86 binary), add+LayerNorm kernel (sm_86 binary); ATen instead "
        "of: fp8 cast kernels (fp8 needs compute capability 8.9 or newer, this GPU has 8.6)");
  CHECK(support.take_warnings().empty());
}

TEST_CASE("kernel support: on an L4 (8.9) fp8's casts run their sm_89 binary",
          "[kernels][emulated][capability]") {
  const emu::FakedCapability ada(89);
  auto support = emulated_support();
  CHECK(support.status(FusedPath::fp8_casts, kGpu).image == "sm_89 binary");
  CHECK(support.runs(FusedPath::fp8_casts, kGpu));
  // What the path computes there: the emulated sm_89 kernels against the ATen path.
  torch::manual_seed(4);
  const auto x = torch::randn({48, 80});
  const ampt::kernels::Fp8Format format{c10::kFloat8_e4m3fn, 0};
  const auto aten = ampt::kernels::cast_fp8_rowwise(x, format, /*use_kernel=*/false);
  const auto amaxes = torch::zeros({48 + 80}, torch::kInt32);
  auto* bits = reinterpret_cast<uint32_t*>(amaxes.data_ptr<int32_t>());
  emulated::fp8_rowwise_amax(x.data_ptr(), emulated::Dtype::float32, 48, 80, bits, bits + 48,
                             nullptr);
  auto data = torch::empty({48, 80}, c10::kFloat8_e4m3fn);
  auto transposed = torch::empty({80, 48}, c10::kFloat8_e4m3fn);
  auto row_inverse = torch::empty({48}), col_inverse = torch::empty({80});
  emulated::fp8_rowwise_cast_transpose(
      x.data_ptr(), emulated::Dtype::float32, 48, 80, bits, bits + 48,
      static_cast<float>(format.max_over_headroom()), emulated::Fp8Dtype::e4m3, data.data_ptr(),
      transposed.data_ptr(), row_inverse.data_ptr<float>(), col_inverse.data_ptr<float>(), nullptr);
  CHECK(torch::equal(data.view(torch::kUInt8), aten.data.view(torch::kUInt8)));
  CHECK(torch::equal(row_inverse, aten.inverse));
}

TEST_CASE("kernel support: a path whose self-check fails runs as ATen, with one warning naming "
          "it, the device and the error, and checks once per device",
          "[kernels][capability]") {
  int checks = 0;
  bool ran_inside = false;
  KernelSupport* self = nullptr;
  const auto image = [](const c10::Device&) {
    return PathStatus{true, "sm_90 binary", "", ""};
  };
  KernelSupport support(
      {{FusedPath::add_layer_norm,
        {image,
         [&](const c10::Device& device) -> std::string {
           ++checks;
           // The check takes the path it checks.
           ran_inside = self->runs(FusedPath::add_layer_norm, device);
           throw std::runtime_error("sum: relative error 0.98 against ATen");
         }}},
       {FusedPath::softmax_cross_entropy,
        {image, [&](const c10::Device&) { return std::string("max relative error 1e-06"); }}}},
      [](const c10::Device& d) { return d.str() + " (a test GPU)"; });
  self = &support;
  CHECK_FALSE(support.runs(FusedPath::add_layer_norm, kGpu));
  CHECK_FALSE(support.runs(FusedPath::add_layer_norm, kGpu));
  CHECK(checks == 1);
  CHECK(ran_inside);
  const auto status = support.status(FusedPath::add_layer_norm, kGpu);
  CHECK(status.reason == "its self-check failed: sum: relative error 0.98 against ATen");
  const auto warnings = support.take_warnings();
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] == "add+LayerNorm kernel on cuda:0 (a test GPU) failed its self-check "
                       "against ATen, so ATen runs instead: sum: relative error 0.98 against ATen");
  CHECK(support.take_warnings().empty());
  // Another device is asked on its own.
  CHECK_FALSE(support.runs(FusedPath::add_layer_norm, c10::Device(c10::kCUDA, 1)));
  CHECK(checks == 2);
  CHECK(support.runs(FusedPath::softmax_cross_entropy, kGpu));
  CHECK(support.status(FusedPath::softmax_cross_entropy, kGpu).check == "max relative error 1e-06");
  // A path without a probe in this build does not run.
  CHECK(support.status(FusedPath::gemm_epilogues, kGpu).reason == "not built into this ampt");
}
