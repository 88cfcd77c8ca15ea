// The types of the CUDA kernels' host entry points (cuda/launch.h), outside that folder: the
// kernels built by nvcc and their CPU emulation in the tests (which renames the cuda namespace)
// then share one set of types, so either set of entry points fills one table (kernel_backend.h).
#pragma once

#include <cstdint>

namespace ampt::kernels::abi {

enum class Dtype { float32, bfloat16, float16 };

// Which of a kernel file's images the current device would run, as CUDA's loader picks one: a
// binary (SASS) of the device's major version whose minor is not above the device's, else PTX of
// an architecture not above the device's, compiled by the driver; none otherwise.
struct KernelImage {
  int capability = 0;      // the device's compute capability, major * 10 + minor (86 for 8.6)
  int needs = 0;           // the capability the file's kernels need (89 for fp8), 0: any
  int binary_version = 0;  // the image run (cudaFuncAttributes): 86 for sm_86; 0 when none runs
  int ptx_version = 0;     // the PTX it came from, for an image compiled from PTX
  const char* error = nullptr;  // CUDA's message when none runs (null when `needs` is the reason)
};

// The (residual and sum, branch, normed) element types add_layer_norm has kernels for: what
// fp32 training, O1 autocast (an fp32 residual stream, half branches and half inputs to the next
// matmul) and a wholly half model produce.
enum class AddLayerNormLayout { f32_f32_f32, f32_bf16_bf16, f32_f16_f16, bf16_bf16_bf16, f16_f16_f16 };

enum class Fp8Dtype { e4m3, e5m2 };

// What the fp8 passes apply to each value of their input first, in float32 (the amax, the
// column sums and the fp8 copies are of the result): nothing; GPT-2's tanh GELU (the MLP's
// hidden activation, cast for c_proj); or x · GELU'(pre), the GELU's gradient from the gradient
// of its output x and its input `pre` (cast for c_fc's weight and input gradients).
enum class Fp8Prologue { none, gelu_tanh, gelu_tanh_grad };

// The input of the fp8 passes: x [rows, cols] (row-major, `dtype`; rows and cols multiples of
// 16, 16-byte aligned) and, for gelu_tanh_grad, `pre` of the same shape, dtype and alignment.
struct Fp8Input {
  const void* data;
  Dtype dtype;
  Fp8Prologue prologue = Fp8Prologue::none;
  const void* pre = nullptr;
};

// Delayed scaling's bookkeeping, done by the last block of fp8_cast_transpose to finish, so the
// host never reads an amax: amax(x) enters the `history` ring at the slot after `*newest`,
// `*last_scale` ← this call's scale, and `*scale` ← max_over_headroom / a where a is the
// history's maximum (or, without use_history_max, amax(x)) when that quotient is finite and
// positive; otherwise `*scale` stays. `scratch` [2] must be zero before the call and is zero
// after it (the amax's bits and the count of finished blocks).
struct Fp8ScaleUpdate {
  float* scale;
  float* last_scale;
  float* history;
  int32_t* newest;
  int64_t history_len;
  bool use_history_max;
  float max_over_headroom;
  uint32_t* scratch;
};

// bitsandbytes' NormalFloat-4 layout (precision/nf4.h): blocks of 64 values, each with one
// absmax, and the absmax themselves quantized again in blocks of 256.
inline constexpr int64_t kNf4Block = 64;
inline constexpr int64_t kNf4AbsmaxBlock = 256;

// A frozen weight in that storage, for dequantize_nf4: two 4-bit codes a byte, the first in the
// high nibble; each block's absmax is its 8-bit code's value in `dynamic_map` times the fp32
// absmax2 of its kNf4AbsmaxBlock blocks, plus `offset`. The tables travel in the kernel's
// arguments.
struct Nf4Input {
  const uint8_t* codes = nullptr;    // [(numel + 1) / 2]
  const uint8_t* absmax = nullptr;   // [ceil(numel / kNf4Block)]
  const float* absmax2 = nullptr;    // [ceil(blocks / kNf4AbsmaxBlock)]
  float offset = 0.0f;
  int64_t numel = 0;
  float values[16] = {};             // the NormalFloat values
  float dynamic_map[256] = {};       // bitsandbytes' signed dynamic map
};

// The one-byte codes of a row-scaled frozen weight (precision/row_scaled.h).
enum class RowCode { int8, e4m3 };

// AdamW over a list of float32 parameters (adamw.cu), as torch.optim.AdamW's fused CUDA kernel
// computes it, and a half copy of each stepped parameter written in the same pass. One launch
// takes up to kAdamWTensors tensors: the pointers travel in the kernel's arguments.
inline constexpr int kAdamWTensors = 24;

struct AdamWTensors {
  int count = 0;
  float* params[kAdamWTensors] = {};
  const float* grads[kAdamWTensors] = {};
  float* exp_avgs[kAdamWTensors] = {};
  float* exp_avg_sqs[kAdamWTensors] = {};
  const float* steps[kAdamWTensors] = {};  // each parameter's step count, this step's included
  void* copies[kAdamWTensors] = {};        // the half copy, or null
  int64_t numels[kAdamWTensors] = {};
};

struct AdamWHyper {
  double lr = 0.0;
  const float* lr_tensor = nullptr;  // read on the device instead of `lr` when not null
  double beta1 = 0.9, beta2 = 0.999, weight_decay = 0.0, eps = 1e-8;
  const float* found_inf = nullptr;  // 1: the step is skipped, nothing is written
  Dtype copy_dtype = Dtype::bfloat16;  // the copies' type: bfloat16 or float16
};

}  // namespace ampt::kernels::abi
