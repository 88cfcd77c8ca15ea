// NormalFloat-4 storage of a frozen weight, as bitsandbytes makes it (quantize_4bit with
// quant_type "nf4", blocksize 64, compress_statistics true), byte for byte, so that a base
// quantized here is the base peft + bitsandbytes users train: each block of 64 elements (in
// flat row-major order, running across rows of any length, as bitsandbytes' CUDA kernel reads
// them) scaled by its absmax to [-1, 1] and rounded to the nearest of 16 NormalFloat values (a
// tie to the lower), two codes a byte, the first in the high nibble; the absmax themselves
// quantized again (double quantization): their mean taken off, then 8-bit codes of
// bitsandbytes' dynamic map in blocks of 256, each block scaled by its own fp32 absmax.
// (bitsandbytes 0.50.2's AVX-512 CPU dequantize_4bit reads rows that are a multiple of 16 but
// not of 64 with another block's absmax: tests/precision/nf4_reference.py.)
#pragma once

#include "ampt/kernels/kernel_abi.h"

#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace ampt::precision {

// What an nf4 weight of `numel` elements holds: half a byte each (rounded up), a byte per block
// of 64 (the absmax's codes), an fp32 scale per 256 blocks, and the fp32 offset. The memory
// estimate counts the same bytes.
int64_t nf4_bytes(int64_t numel);

struct Nf4Weight {
  torch::Tensor codes;    // uint8 [(numel + 1) / 2]
  torch::Tensor absmax;   // uint8 [blocks]: each block's absmax less `offset`, 8-bit codes
  torch::Tensor absmax2;  // float32 [ceil(blocks / 256)]: the scale of each 256 of those
  float offset = 0.0f;    // the mean of the blocks' absmax
  std::vector<int64_t> shape;
  c10::ScalarType dtype = c10::kFloat;  // the weight's, which dequantization gives back

  static constexpr int64_t kBlock = kernels::abi::kNf4Block;
  static constexpr int64_t kAbsmaxBlock = kernels::abi::kNf4AbsmaxBlock;
  int64_t numel() const;
  int64_t bytes() const { return nf4_bytes(numel()); }
};

// `weight` (fp32, bf16 or fp16, on the CPU) in nf4. The offset is ATen's fp32 mean, which for
// 32768 blocks and more depends on the thread count, as bitsandbytes' does.
Nf4Weight quantize_nf4(const torch::Tensor& weight);

// The weight back in `dtype` (bitsandbytes' dequantize_4bit): each element its NormalFloat value
// times its block's absmax (the 8-bit code's value times its scale, plus the offset), one fp32
// multiply each, rounded once to `dtype`.
torch::Tensor dequantize_nf4(const Nf4Weight& weight, c10::ScalarType dtype);

}  // namespace ampt::precision
