// A LoRA base's frozen weight, stored quantized (precision/nf4.h, precision/row_scaled.h), back
// to the dense operand of its GEMM, each value one fp32 multiply rounded once to the GEMM's
// dtype. On a GPU where the dequantize path runs (kernel_support.h) one kernel pass
// (cuda/dequantize.cu); elsewhere ATen operations, a chunk at a time, which the kernel matches
// bit for bit.
#pragma once

#include "ampt/kernels/kernel_abi.h"

#include <torch/types.h>

#include <array>
#include <cstdint>

namespace ampt::kernels {

// bitsandbytes' 16 NormalFloat values (get_4bit_type("nf4")) and its signed dynamic map
// (create_dynamic_map(), 256 values), as fp32.
const std::array<float, 16>& nf4_values();
const std::array<float, 256>& dynamic_map();

// An nf4 weight's storage, as cuda::Nf4Input describes it, in tensors on one device.
struct Nf4Codes {
  torch::Tensor codes;    // uint8 [(numel + 1) / 2]
  torch::Tensor absmax;   // uint8 [ceil(numel / 64)]
  torch::Tensor absmax2;  // float32 [ceil(numel / 64 / 256)]
  float offset = 0.0f;
  int64_t numel = 0;
};

// The kernel's argument (cuda::dequantize_nf4) for `weight`, whose tensors are contiguous.
abi::Nf4Input nf4_input(const Nf4Codes& weight);

// The flat weight [numel] in `dtype` (float32, bfloat16 or float16), on the codes' device.
torch::Tensor dequantize_nf4(const Nf4Codes& weight, c10::ScalarType dtype);
torch::Tensor dequantize_nf4_reference(const Nf4Codes& weight, c10::ScalarType dtype);

// values [rows, cols] (int8 or float8_e4m3fn) times scales [rows] (float32), in `dtype`.
torch::Tensor dequantize_rows(const torch::Tensor& values, const torch::Tensor& scales,
                              c10::ScalarType dtype);
torch::Tensor dequantize_rows_reference(const torch::Tensor& values, const torch::Tensor& scales,
                                        c10::ScalarType dtype);

}  // namespace ampt::kernels
