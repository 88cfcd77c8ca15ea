#include "ampt/kernels/dequantize.h"

#include "ampt/kernels/cuda_dtype.h"
#include "ampt/kernels/kernel_support.h"

#include <ATen/record_function.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <bit>
#include <vector>

namespace ampt::kernels {
namespace {

using abi::kNf4AbsmaxBlock;
using abi::kNf4Block;

// bitsandbytes' get_4bit_type("nf4"), as fp32 bits.
constexpr std::array<uint32_t, 16> kNf4Bits = {
    0xbf800000, 0xbf3239b1, 0xbf066b30, 0xbeca32a0, 0xbe91a24d, 0xbe3d353f, 0xbdba7871, 0x00000000,
    0x3da2faff, 0x3e24cae3, 0x3e7c04dd, 0x3ead033a, 0x3ee1a4b8, 0x3f1007ab, 0x3f3913b3, 0x3f800000,
};

// bitsandbytes' create_dynamic_map() (signed, 7 exponent bits, 8 bits), as fp32 bits: its
// values come from fp32 linspace and double arithmetic, so they are copied, not derived.
constexpr std::array<uint32_t, 256> kDynamicBits = {
    0xbf7e3333, 0xbf7a999a, 0xbf770000, 0xbf736666, 0xbf6fcccd, 0xbf6c3333, 0xbf68999a, 0xbf650000,
    0xbf616666, 0xbf5dcccd, 0xbf5a3333, 0xbf56999a, 0xbf530000, 0xbf4f6666, 0xbf4bcccd, 0xbf483333,
    0xbf44999a, 0xbf410000, 0xbf3d6666, 0xbf39cccd, 0xbf363334, 0xbf32999a, 0xbf2f0000, 0xbf2b6666,
    0xbf27cccd, 0xbf243334, 0xbf20999a, 0xbf1d0000, 0xbf196666, 0xbf15cccd, 0xbf123334, 0xbf0e999a,
    0xbf0b0000, 0xbf076666, 0xbf03cccc, 0xbf003333, 0xbef93332, 0xbef20000, 0xbeeacccc, 0xbee3999a,
    0xbedc6666, 0xbed53333, 0xbece0000, 0xbec6cccc, 0xbebf999a, 0xbeb86666, 0xbeb13333, 0xbeaa0000,
    0xbea2cccc, 0xbe9b999a, 0xbe946666, 0xbe8d3334, 0xbe860000, 0xbe7d9999, 0xbe6f3333, 0xbe60cccd,
    0xbe526666, 0xbe440000, 0xbe35999a, 0xbe273333, 0xbe18cccd, 0xbe0a6666, 0xbdf80000, 0xbddb3334,
    0xbdc9eb85, 0xbdc428f7, 0xbdbe6667, 0xbdb8a3d7, 0xbdb2e148, 0xbdad1eb8, 0xbda75c2a, 0xbda1999a,
    0xbd9bd70a, 0xbd96147b, 0xbd9051eb, 0xbd8a8f5d, 0xbd84cccd, 0xbd7e147b, 0xbd728f5d, 0xbd670a3d,
    0xbd5b851f, 0xbd500000, 0xbd447ae1, 0xbd38f5c3, 0xbd2d70a3, 0xbd21eb85, 0xbd166667, 0xbd0ae148,
    0xbcfeb852, 0xbce7ae15, 0xbcd0a3d7, 0xbcb9999a, 0xbca28f5d, 0xbc8b851f, 0xbc68f5c3, 0xbc3ae148,
    0xbc1f3b64, 0xbc160418, 0xbc0ccccd, 0xbc039581, 0xbbf4bc6a, 0xbbe24dd3, 0xbbcfdf3b, 0xbbbd70a4,
    0xbbab020d, 0xbb989374, 0xbb8624dd, 0xbb676c8a, 0xbb428f5c, 0xbb1db22d, 0xbaf1a9fc, 0xbaa7ef9d,
    0xba7765ff, 0xba59e83e, 0xba3c6a80, 0xba1eecc1, 0xba016f01, 0xb9c7e283, 0xb98ce705, 0xb923d70b,
    0xb8ba1f4b, 0xb88aefb3, 0xb8378034, 0xb7b24206, 0xb70205ff, 0xb65a1a94, 0xb513a3b7, 0x00000000,
    0x3513a3b7, 0x365a1a94, 0x370205ff, 0x37b24206, 0x38378034, 0x388aefb3, 0x38ba1f4b, 0x3923d70b,
    0x398ce705, 0x39c7e283, 0x3a016f01, 0x3a1eecc1, 0x3a3c6a80, 0x3a59e83e, 0x3a7765ff, 0x3aa7ef9d,
    0x3af1a9fc, 0x3b1db22d, 0x3b428f5c, 0x3b676c8a, 0x3b8624dd, 0x3b989374, 0x3bab020d, 0x3bbd70a4,
    0x3bcfdf3b, 0x3be24dd3, 0x3bf4bc6a, 0x3c039581, 0x3c0ccccd, 0x3c160418, 0x3c1f3b64, 0x3c3ae148,
    0x3c68f5c3, 0x3c8b851f, 0x3ca28f5d, 0x3cb9999a, 0x3cd0a3d7, 0x3ce7ae15, 0x3cfeb852, 0x3d0ae148,
    0x3d166667, 0x3d21eb85, 0x3d2d70a3, 0x3d38f5c3, 0x3d447ae1, 0x3d500000, 0x3d5b851f, 0x3d670a3d,
    0x3d728f5d, 0x3d7e147b, 0x3d84cccd, 0x3d8a8f5d, 0x3d9051eb, 0x3d96147b, 0x3d9bd70a, 0x3da1999a,
    0x3da75c2a, 0x3dad1eb8, 0x3db2e148, 0x3db8a3d7, 0x3dbe6667, 0x3dc428f7, 0x3dc9eb85, 0x3ddb3334,
    0x3df80000, 0x3e0a6666, 0x3e18cccd, 0x3e273333, 0x3e35999a, 0x3e440000, 0x3e526666, 0x3e60cccd,
    0x3e6f3333, 0x3e7d9999, 0x3e860000, 0x3e8d3334, 0x3e946666, 0x3e9b999a, 0x3ea2cccc, 0x3eaa0000,
    0x3eb13333, 0x3eb86666, 0x3ebf999a, 0x3ec6cccc, 0x3ece0000, 0x3ed53333, 0x3edc6666, 0x3ee3999a,
    0x3eeacccc, 0x3ef20000, 0x3ef93332, 0x3f003333, 0x3f03cccc, 0x3f076666, 0x3f0b0000, 0x3f0e999a,
    0x3f123334, 0x3f15cccd, 0x3f196666, 0x3f1d0000, 0x3f20999a, 0x3f243334, 0x3f27cccd, 0x3f2b6666,
    0x3f2f0000, 0x3f32999a, 0x3f363334, 0x3f39cccd, 0x3f3d6666, 0x3f410000, 0x3f44999a, 0x3f483333,
    0x3f4bcccd, 0x3f4f6666, 0x3f530000, 0x3f56999a, 0x3f5a3333, 0x3f5dcccd, 0x3f616666, 0x3f650000,
    0x3f68999a, 0x3f6c3333, 0x3f6fcccd, 0x3f736666, 0x3f770000, 0x3f7a999a, 0x3f7e3333, 0x3f800000,
};

template <std::size_t N>
std::array<float, N> as_floats(const std::array<uint32_t, N>& bits) {
  std::array<float, N> out{};
  for (std::size_t i = 0; i < N; ++i) out[i] = std::bit_cast<float>(bits[i]);
  return out;
}

// The dtypes the kernels write; any other is ATen's.
bool kernel_dtype(c10::ScalarType dtype) {
  return dtype == c10::kFloat || dtype == c10::kBFloat16 || dtype == c10::kHalf;
}

}  // namespace

const std::array<float, 16>& nf4_values() {
  static const auto values = as_floats(kNf4Bits);
  return values;
}

const std::array<float, 256>& dynamic_map() {
  static const auto values = as_floats(kDynamicBits);
  return values;
}

abi::Nf4Input nf4_input(const Nf4Codes& weight) {
  abi::Nf4Input in;
  in.codes = weight.codes.data_ptr<uint8_t>();
  in.absmax = weight.absmax.data_ptr<uint8_t>();
  in.absmax2 = weight.absmax2.data_ptr<float>();
  in.offset = weight.offset;
  in.numel = weight.numel;
  std::ranges::copy(nf4_values(), in.values);
  std::ranges::copy(dynamic_map(), in.dynamic_map);
  return in;
}

torch::Tensor dequantize_nf4(const Nf4Codes& weight, c10::ScalarType dtype) {
  const auto device = weight.codes.device();
  const auto* kernels = kernels_for(FusedPath::dequantize, device);
  if (kernels == nullptr || !kernel_dtype(dtype)) return dequantize_nf4_reference(weight, dtype);
  RECORD_FUNCTION("ampt::dequantize_nf4", std::vector<c10::IValue>());
  const c10::DeviceGuard on_device(device);
  const Nf4Codes contiguous{weight.codes.contiguous(), weight.absmax.contiguous(),
                            weight.absmax2.contiguous(), weight.offset, weight.numel};
  auto out = torch::empty({weight.numel}, contiguous.absmax2.options().dtype(dtype));
  kernels->dequantize_nf4(nf4_input(contiguous), cuda_dtype(dtype), out.data_ptr(),
                          kernels->stream(device));
  return out;
}

torch::Tensor dequantize_nf4_reference(const Nf4Codes& weight, c10::ScalarType dtype) {
  // ATen ops on the device the codes are on, each the fp32 operation bitsandbytes does.
  const auto device = weight.codes.device();
  const auto on = torch::TensorOptions().dtype(torch::kFloat).device(device);
  static const auto table = [] {
    const auto& v = nf4_values();
    return torch::tensor(std::vector<float>(v.begin(), v.end()));
  }();
  static const auto table8 = [] {
    const auto& v = dynamic_map();
    return torch::tensor(std::vector<float>(v.begin(), v.end()));
  }();
  const int64_t n = weight.numel, blocks = weight.absmax.numel();
  const auto scale = weight.absmax2.repeat_interleave(kNf4AbsmaxBlock).narrow(0, 0, blocks);
  const auto absmax =
      table8.to(device).index_select(0, weight.absmax.to(torch::kLong)) * scale + weight.offset;
  const auto values_table = table.to(on);
  auto out = torch::empty({n}, on.dtype(dtype));
  // A chunk at a time (whole blocks, an even count), so that the integer and fp32 intermediates,
  // about 20 bytes per value, stay a few MiB whatever the weight's size; each value is still one
  // fp32 multiply rounded once to `dtype`.
  constexpr int64_t kChunk = int64_t{1} << 18;
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t count = std::min(kChunk, n - start);
    const auto packed = weight.codes.narrow(0, start / 2, (count + 1) / 2).to(torch::kLong);
    const auto codes = torch::stack({packed.bitwise_right_shift(4), packed.bitwise_and(15)}, 1)
                           .reshape(-1)
                           .narrow(0, 0, count);
    const auto per_element = absmax.narrow(0, start / kNf4Block,
                                           (count + kNf4Block - 1) / kNf4Block)
                                 .repeat_interleave(kNf4Block)
                                 .narrow(0, 0, count);
    out.narrow(0, start, count).copy_(values_table.index_select(0, codes) * per_element);
  }
  return out;
}

torch::Tensor dequantize_rows(const torch::Tensor& values, const torch::Tensor& scales,
                              c10::ScalarType dtype) {
  const auto device = values.device();
  const auto* kernels = kernels_for(FusedPath::dequantize, device);
  if (kernels == nullptr || !kernel_dtype(dtype)) {
    return dequantize_rows_reference(values, scales, dtype);
  }
  RECORD_FUNCTION("ampt::dequantize_rows", std::vector<c10::IValue>());
  const c10::DeviceGuard on_device(device);
  const auto v = values.contiguous();
  const auto s = scales.contiguous();
  auto out = torch::empty(v.sizes(), s.options().dtype(dtype));
  const auto code = v.scalar_type() == c10::kChar ? abi::RowCode::int8 : abi::RowCode::e4m3;
  kernels->dequantize_rows(v.data_ptr(), code, s.data_ptr<float>(), v.size(0), v.size(1),
                           cuda_dtype(dtype), out.data_ptr(), kernels->stream(device));
  return out;
}

torch::Tensor dequantize_rows_reference(const torch::Tensor& values, const torch::Tensor& scales,
                                        c10::ScalarType dtype) {
  // Rows a chunk at a time, so that the fp32 intermediates stay a few MiB whatever the weight's
  // size; each value is one fp32 multiply rounded once to `dtype`.
  const int64_t rows = values.size(0), cols = std::max<int64_t>(1, values.size(1));
  const int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 18) / cols);
  auto out = torch::empty(values.sizes(), scales.options().dtype(dtype));
  for (int64_t start = 0; start < rows; start += chunk) {
    const int64_t count = std::min(chunk, rows - start);
    out.narrow(0, start, count)
        .copy_(values.narrow(0, start, count).to(torch::kFloat) *
               scales.narrow(0, start, count).unsqueeze(1));
  }
  return out;
}

}  // namespace ampt::kernels
