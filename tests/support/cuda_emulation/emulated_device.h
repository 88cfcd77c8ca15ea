// The device the CUDA emulation (emulated_cuda.h) runs kernels "on", for the tests to choose:
// its compute capability decides which of a kernel file's images it runs, or that none does, as
// CUDA's loader decides on a real GPU. Free of the emulation's CUDA macros, so a test includes it
// beside torch.
#pragma once

#include <utility>
#include <vector>

namespace emu {

// The architectures a kernel file was built for: binaries (SASS) and the PTX, 0 for none, each
// as major * 10 + minor.
struct Images {
  std::vector<int> binaries;
  int ptx = 0;
};

// (binaryVersion, ptxVersion) of the image a device of `capability` runs, as CUDA's loader picks
// it: the binary of the device's major version with the highest minor not above the device's,
// else the PTX compiled for the device when the PTX's architecture is not above it; (0, 0) when
// none runs.
inline std::pair<int, int> chosen_image(const Images& images, int capability) {
  int best = 0;
  for (const int binary : images.binaries) {
    if (binary / 10 == capability / 10 && binary <= capability && binary > best) best = binary;
  }
  if (best != 0) return {best, best};
  if (images.ptx != 0 && images.ptx <= capability) return {capability, images.ptx};
  return {0, 0};
}

// The emulated device's compute capability: 9.0 (Hopper) unless a FakedCapability says other.
inline int& device_capability() {
  static int capability = 90;
  return capability;
}

// For a test's scope, the emulated device has `capability` (86 for an RTX 30xx's 8.6).
class FakedCapability {
 public:
  explicit FakedCapability(int capability) : saved_(device_capability()) {
    device_capability() = capability;
  }
  ~FakedCapability() { device_capability() = saved_; }
  FakedCapability(const FakedCapability&) = delete;
  FakedCapability& operator=(const FakedCapability&) = delete;

 private:
  int saved_;
};

}  // namespace emu
