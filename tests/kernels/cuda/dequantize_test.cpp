// The dequantize kernels (src/ampt/kernels/cuda/dequantize.cu) emulated on the CPU against the
// ATen path of kernels/dequantize bit for bit: nf4 storage made by precision/nf4.h's quantizer
// (rows of any length, an expert stack) and random bytes (every table entry, a short last block,
// an odd count, several absmax2 blocks, several grid-stride steps), int8 and e4m3 rows with every
// byte value, into each output dtype; and the Linear seam over a quantized base taking the kernel
// where the path runs.
#include "ampt/kernels/dequantize.h"
#include "ampt/kernels/kernel_support.h"
#include "ampt/precision/nf4.h"
#include "ampt/precision/quantized_weight.h"

#include "cuda_emulated/launch.h"
#include "kernels/cuda/emulated_backend.h"
#include "kernels/cuda/kernel_checks.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <vector>

using ampt::kernels::Nf4Codes;
using ampt::test::emulated_dtype;
using ampt::test::Guarded;
namespace emulated = ampt::kernels::cuda_emulated;

namespace {

const auto kOutputs = {torch::kFloat32, torch::kBFloat16, torch::kHalf};

// Equal bit for bit, NaN where NaN.
bool same(const torch::Tensor& got, const torch::Tensor& want) {
  return got.sizes() == want.sizes() && got.scalar_type() == want.scalar_type() &&
         torch::allclose(got.to(torch::kFloat64), want.to(torch::kFloat64), 0.0, 0.0,
                         /*equal_nan=*/true);
}

torch::Tensor emulated_nf4(const Nf4Codes& w, c10::ScalarType dtype) {
  Guarded out({w.numel}, dtype, "nf4 values");
  emulated::dequantize_nf4(ampt::kernels::nf4_input(w), emulated_dtype(dtype), out.data(),
                           nullptr);
  return out.get();
}

torch::Tensor emulated_rows(const torch::Tensor& values, const torch::Tensor& scales,
                            c10::ScalarType dtype) {
  const auto code = values.scalar_type() == torch::kChar ? emulated::RowCode::int8
                                                         : emulated::RowCode::e4m3;
  Guarded out({values.size(0), values.size(1)}, dtype, "row values");
  emulated::dequantize_rows(values.data_ptr(), code, scales.data_ptr<float>(), values.size(0),
                            values.size(1), emulated_dtype(dtype), out.data(), nullptr);
  return out.get();
}

}  // namespace

TEST_CASE("dequantize kernels: nf4 equals the ATen path bit for bit",
          "[kernels][emulated][qlora]") {
  torch::manual_seed(11);
  SECTION("a weight quantized as bitsandbytes does") {
    // 300 blocks and a short one; two absmax2 blocks; bf16 weights, as a base's are.
    const auto weight = (torch::randn({301, 64}) * 0.02).to(torch::kBFloat16).narrow(1, 0, 63);
    const auto q = ampt::precision::quantize_nf4(weight.contiguous());
    const Nf4Codes codes{q.codes, q.absmax, q.absmax2, q.offset, q.numel()};
    for (const auto dtype : kOutputs) {
      INFO(c10::toString(dtype));
      CHECK(same(emulated_nf4(codes, dtype),
                 ampt::kernels::dequantize_nf4_reference(codes, dtype)));
    }
  }
  SECTION("rows that are not a multiple of 64 and an expert stack, whose blocks run across rows") {
    // nf4_test.cpp holds the same shapes' ATen path to bitsandbytes' bytes and values.
    const std::vector<std::vector<int64_t>> shapes{{64, 160}, {5, 96}, {4, 100}, {3, 40, 160}};
    for (const auto& shape : shapes) {
      INFO(torch::IntArrayRef(shape));
      const auto q =
          ampt::precision::quantize_nf4((torch::randn(shape) * 0.02).to(torch::kBFloat16));
      const Nf4Codes codes{q.codes, q.absmax, q.absmax2, q.offset, q.numel()};
      for (const auto dtype : kOutputs) {
        INFO(c10::toString(dtype));
        CHECK(same(emulated_nf4(codes, dtype),
                   ampt::kernels::dequantize_nf4_reference(codes, dtype)));
      }
    }
  }
  SECTION("any bytes: every code and absmax code, odd counts, more values than one grid holds") {
    // 4096 blocks of 256 threads hold 2^20 codes' bytes in one step: 2^21 + 1 values take two.
    for (const int64_t numel :
         {int64_t{1}, int64_t{63}, int64_t{64 * 257 + 5}, (int64_t{1} << 21) + 1}) {
      INFO(numel << " values");
      const int64_t blocks = (numel + 63) / 64;
      const Nf4Codes codes{torch::randint(0, 256, {(numel + 1) / 2}).to(torch::kUInt8),
                           torch::randint(0, 256, {blocks}).to(torch::kUInt8),
                           torch::rand({(blocks + 255) / 256}) * 0.1 + 0.01, 0.004f, numel};
      // The largest in bf16 only: the emulation runs a million threads in a few seconds.
      const auto dtypes = numel < (int64_t{1} << 20) ? std::vector<c10::ScalarType>(kOutputs)
                                                     : std::vector{torch::kBFloat16};
      for (const auto dtype : dtypes) {
        INFO(c10::toString(dtype));
        CHECK(same(emulated_nf4(codes, dtype),
                   ampt::kernels::dequantize_nf4_reference(codes, dtype)));
      }
    }
  }
}

TEST_CASE("dequantize kernels: int8 and e4m3 rows equal the ATen path bit for bit",
          "[kernels][emulated][qlora]") {
  torch::manual_seed(12);
  // Row 0 holds every byte value: e4m3's subnormals, -0, 448 and its NaN among them; the other
  // rows are random, and a zero scale.
  const auto every = torch::arange(256, torch::kInt32).to(torch::kUInt8).view({1, 256});
  auto bytes = torch::cat({every, torch::randint(0, 256, {69, 256}).to(torch::kUInt8)});
  auto scales = torch::rand({70}) * 0.01;
  scales[3] = 0.0f;
  for (const auto code : {torch::kChar, c10::kFloat8_e4m3fn}) {
    const auto values = bytes.view(code);
    for (const auto dtype : kOutputs) {
      INFO(c10::toString(code) << " into " << c10::toString(dtype));
      CHECK(same(emulated_rows(values, scales, dtype),
                 ampt::kernels::dequantize_rows_reference(values, scales, dtype)));
    }
  }
  // Rows wider than the grid's columns (64 blocks of 256) take a second step along them.
  const auto wide = torch::randint(-127, 128, {2, 64 * 256 + 3}).to(torch::kChar);
  const auto two = torch::rand({2});
  CHECK(same(emulated_rows(wide, two, torch::kBFloat16),
             ampt::kernels::dequantize_rows_reference(wide, two, torch::kBFloat16)));
}

namespace {

int kernel_calls = 0;

}  // namespace

TEST_CASE("dequantize kernels: the Linear seam over a quantized base takes the kernel where the "
          "path runs, with the ATen path's values and gradients",
          "[kernels][emulated][qlora]") {
  using ampt::config::BaseDtype;
  torch::manual_seed(13);
  auto backend = ampt::test::emulated_backend();
  backend.dequantize_nf4 = [](const emulated::Nf4Input& w, emulated::Dtype dtype, void* out,
                              void* stream) {
    ++kernel_calls;
    emulated::dequantize_nf4(w, dtype, out, stream);
  };
  backend.dequantize_rows = [](const void* values, emulated::RowCode code, const float* scales,
                               int64_t rows, int64_t cols, emulated::Dtype dtype, void* out,
                               void* stream) {
    ++kernel_calls;
    emulated::dequantize_rows(values, code, scales, rows, cols, dtype, out, stream);
  };
  const auto w = torch::randn({48, 96}) * 0.05;
  const auto bias = torch::randn({48});
  const auto x = torch::randn({3, 5, 96});
  const auto g = torch::randn({3, 5, 48});
  for (const auto format : {BaseDtype::nf4, BaseDtype::int8, BaseDtype::fp8}) {
    INFO(static_cast<int>(format));
    const auto q = c10::make_intrusive<ampt::precision::QuantizedWeight>(w, format, w.device());
    // The ATen path: no kernel support installed, the CPU's.
    const auto aten_x = x.clone().requires_grad_();
    const auto want = ampt::precision::quantized_linear(aten_x, q, bias);
    want.backward(g);
    ampt::kernels::KernelSupport support(ampt::kernels::own_kernel_probes(backend), backend);
    const ampt::kernels::KernelSupportOverride installed(support);
    kernel_calls = 0;
    const auto kernel_x = x.clone().requires_grad_();
    const auto got = ampt::precision::quantized_linear(kernel_x, q, bias);
    got.backward(g);
    // The self-check's three (nf4, int8, e4m3) in each of two dtypes, then one in the forward
    // and one for the input's gradient.
    CHECK(kernel_calls == 2 * 3 + 2);
    CHECK(support.take_warnings().empty());
    CHECK(torch::equal(got, want));
    CHECK(torch::equal(kernel_x.grad(), aten_x.grad()));
  }
}
