// A frozen weight stored quantized (--base_dtype): its GEMM equals a Linear over the dequantized
// weight, values and input gradients, and gives the weight no gradient; int8 and e4m3 rows by
// hand; fp8 storage through the row-wise fp8 GEMM where it runs; a quantized base without LoRA
// is refused.
#include "ampt/precision/quantized_weight.h"

#include "ampt/core/errors.h"
#include "ampt/kernels/fp8_quantize.h"
#include "ampt/kernels/kernel_support.h"
#include "ampt/models/lora.h"
#include "support/skip.h"

#include <ATen/autocast_mode.h>
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <map>
#include <string>

using ampt::config::BaseDtype;
using ampt::precision::QuantizedWeight;
using ampt::precision::quantized_linear;

TEST_CASE("quantized weight: the GEMM and the input's gradient equal a Linear over the dequantized weight",
          "[precision][qlora]") {
  torch::manual_seed(0);
  const auto w = torch::randn({48, 96});
  const auto bias = torch::randn({48});
  for (const auto format :
       {BaseDtype::nf4, BaseDtype::int8, BaseDtype::fp8, BaseDtype::bf16, BaseDtype::fp16}) {
    INFO(static_cast<int>(format));
    const auto q = c10::make_intrusive<QuantizedWeight>(w, format, w.device());
    const auto dense = q->dequantize(torch::kFloat);
    CHECK((dense - w).abs().max().item<float>() < 0.5f * w.abs().max().item<float>());
    auto x = torch::randn({3, 5, 96}).requires_grad_();
    auto x2 = x.detach().clone().requires_grad_();
    const auto y = quantized_linear(x, q, bias);
    const auto y2 = torch::nn::functional::linear(x2, dense, bias);
    CHECK(torch::equal(y, y2));
    const auto g = torch::randn_like(y);
    y.backward(g);
    y2.backward(g);
    CHECK(torch::allclose(x.grad(), x2.grad(), 1e-6, 1e-6));
    // Under autocast the GEMM runs in its dtype, as an autocast Linear over the weight
    // dequantized to it does.
    at::autocast::set_autocast_enabled(at::kCPU, true);
    at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
    const auto half = quantized_linear(x.detach(), q, bias);
    const auto expected =
        torch::nn::functional::linear(x.detach(), q->dequantize(torch::kBFloat16), bias);
    at::autocast::set_autocast_enabled(at::kCPU, false);
    at::autocast::clear_cache();
    CHECK(half.scalar_type() == torch::kBFloat16);
    // Within one bf16 rounding: inside the autograd function the CPU's bf16 GEMM rounds some
    // outputs the other way (fp32 runs above are exact).
    CHECK(torch::allclose(half.to(torch::kFloat), expected.to(torch::kFloat), 1.0 / 128, 1e-2));
  }
  // Without a bias (Llama's projections).
  const auto q = c10::make_intrusive<QuantizedWeight>(w, BaseDtype::nf4, w.device());
  auto x = torch::randn({2, 96}).requires_grad_();
  const auto y = quantized_linear(x, q, torch::Tensor());
  CHECK(torch::equal(y, torch::nn::functional::linear(x.detach(), q->dequantize(torch::kFloat))));
  y.sum().backward();
  CHECK(x.grad().defined());
  // What each holds: nf4 about half a byte per weight, int8 and fp8 one and a scale per row,
  // bf16 and fp16 two.
  const auto cpu = torch::Device(torch::kCPU);
  CHECK(QuantizedWeight(w, BaseDtype::nf4, cpu).bytes() == 48 * 96 / 2 + 72 + 4 + 4);
  CHECK(QuantizedWeight(w, BaseDtype::int8, cpu).bytes() == 48 * 96 + 48 * 4);
  CHECK(QuantizedWeight(w, BaseDtype::fp8, cpu).bytes() == 48 * 96 + 48 * 4);
  CHECK(QuantizedWeight(w, BaseDtype::bf16, cpu).bytes() == 48 * 96 * 2);
  // bf16 is the weight rounded once; its dequantized fp32 is that rounding exactly.
  CHECK(torch::equal(QuantizedWeight(w, BaseDtype::bf16, cpu).dequantize(torch::kFloat),
                     w.to(torch::kBFloat16).to(torch::kFloat)));
}

TEST_CASE("int8 rows: each row over its absmax / 127, rounded, a zero row zero", "[precision][qlora]") {
  // Scale 1 for the first row: -63.5 rounds to even, -64.
  const auto w = torch::tensor({{127.0f, -63.5f, 1.25f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}});
  const auto q = ampt::precision::quantize_rows(w, ampt::precision::RowCode::int8);
  CHECK(torch::equal(q.values, torch::tensor({{127, -64, 1, 0}, {0, 0, 0, 0}}, torch::kInt8)));
  CHECK(q.scales[0].item<float>() == 1.0f);
  CHECK(q.scales[1].item<float>() == 0.0f);
  const auto back = ampt::precision::dequantize_rows(q, torch::kFloat);
  CHECK(torch::equal(back[0], torch::tensor({127.0f, -64.0f, 1.0f, 0.0f})));
  CHECK(torch::equal(back[1], torch::zeros({4})));
}

TEST_CASE("fp8 rows: each row over its absmax / 448 in e4m3, a zero row zero", "[precision][qlora]") {
  // Scale 2 for the first row: 896 -> 448 (e4m3's largest); 3 -> 1.5 exactly; 19 -> 9.5, which
  // e4m3 (3 mantissa bits: 8, 9, 10 at that exponent) rounds to even, 10 -> back 20;
  // 0.01 -> 0.005, e4m3's subnormals step by 2^-9: 3 x 2^-9 = 0.005859375.
  const auto w = torch::tensor({{896.0f, 3.0f, -19.0f, 0.01f}, {0.0f, 0.0f, 0.0f, 0.0f}});
  const auto q = ampt::precision::quantize_rows(w, ampt::precision::RowCode::e4m3);
  CHECK(q.values.scalar_type() == torch::kFloat8_e4m3fn);
  CHECK(q.scales[0].item<float>() == 2.0f);
  CHECK(q.scales[1].item<float>() == 0.0f);
  const auto back = ampt::precision::dequantize_rows(q, torch::kFloat);
  CHECK(torch::equal(back[0], torch::tensor({896.0f, 3.0f, -20.0f, 2.0f * 0.005859375f})));
  CHECK(torch::equal(back[1], torch::zeros({4})));
}

TEST_CASE("base_dtype: a quantized base without LoRA is one line naming the flag", "[precision][qlora]") {
  ampt::config::Config config;
  config.base_dtype = BaseDtype::nf4;
  CHECK_THROWS_WITH(ampt::models::require_base_dtype(config),
                    "base_dtype nf4 stores a LoRA run's frozen base, and lora_rank is 0 (every "
                    "parameter trains): set --lora_rank R, or base_dtype auto for a full fine-tune");
  config.lora_rank = 4;
  CHECK_NOTHROW(ampt::models::require_base_dtype(config));
  config.mixed_precision = ampt::config::MixedPrecision::fp8;
  CHECK_THROWS_WITH(ampt::models::require_base_dtype(config),
                    Catch::StartsWith("base_dtype nf4 dequantizes the base's Linear weights to the "
                                      "compute dtype, and mixed_precision fp8"));
}

TEST_CASE("rows: a weight of several dequantization chunks equals the one-pass product",
          "[precision][qlora]") {
  // 1100 rows of 300: chunks of 873 rows, the second partial.
  torch::manual_seed(4);
  const auto w = torch::randn({1100, 300});
  for (const auto code : {ampt::precision::RowCode::int8, ampt::precision::RowCode::e4m3}) {
    const auto q = ampt::precision::quantize_rows(w, code);
    const auto expected = (q.values.to(torch::kFloat) * q.scales.unsqueeze(1)).to(torch::kBFloat16);
    CHECK(torch::equal(ampt::precision::dequantize_rows(q, torch::kBFloat16), expected));
  }
}

TEST_CASE("quantized weight: fp8 storage feeds the row-wise fp8 GEMM where it runs, x in e4m3 "
          "row by row and each product dequantized by both factors",
          "[precision][qlora]") {
  namespace kernels = ampt::kernels;
  torch::manual_seed(6);
  const auto w = torch::randn({48, 96}) * 0.05;
  const auto bias = torch::randn({48});
  const auto q = c10::make_intrusive<QuantizedWeight>(w, BaseDtype::fp8, w.device());
  const auto x = torch::randn({2, 8, 96}).to(torch::kBFloat16);
  const auto g = torch::randn({2, 8, 48}).to(torch::kBFloat16);
  // Without the GEMM (this CPU's own kernel support): the weight dequantized to bf16.
  const auto dense_x = x.clone().requires_grad_();
  const auto dense = quantized_linear(dense_x, q, bias);
  dense.backward(g);
  const auto odd = torch::randn({3, 5, 96}).to(torch::kBFloat16);
  const auto dense_odd = quantized_linear(odd, q, bias);
  // A CPU that says it runs the row-wise fp8 GEMM: kernels::fp8_gemm then computes what
  // _scaled_mm does from the dequantized operands, under its layout rules.
  kernels::KernelBackend cpu;
  cpu.device_type = c10::kCPU;
  cpu.describe = [](const c10::Device& d) { return d.str(); };
  std::map<kernels::FusedPath, kernels::PathProbe> probes{
      {kernels::FusedPath::fp8_rowwise_gemm,
       {[](const c10::Device&) { return kernels::PathStatus{true, "test", "", ""}; },
        [](const c10::Device&) { return std::string("max relative error 0"); }}}};
  kernels::KernelSupport support(probes, cpu);
  const kernels::KernelSupportOverride installed(support);
  const auto fp8_x = x.clone().requires_grad_();
  const auto y = quantized_linear(fp8_x, q, bias);
  const auto xq = kernels::cast_fp8_rowwise(x.reshape({16, 96}), {c10::kFloat8_e4m3fn, 0});
  const auto stored = q->tensors();
  const auto want = (xq.data.to(torch::kFloat) * xq.inverse.unsqueeze(1))
                        .mm((stored[0].to(torch::kFloat) * stored[1].unsqueeze(1)).t())
                        .add(bias.to(torch::kBFloat16).to(torch::kFloat))
                        .view({2, 8, 48});
  // Within the bf16 output's rounding (2^-8 relative; the bias is the GEMM's, in bf16).
  CHECK(y.scalar_type() == torch::kBFloat16);
  CHECK(torch::allclose(y.to(torch::kFloat), want, 1.0 / 256, 1e-3));
  // x's e4m3 rounding (3 mantissa bits) shows: not the bf16 GEMM's values.
  CHECK_FALSE(torch::allclose(y.to(torch::kFloat), dense.to(torch::kFloat), 1.0 / 256, 1e-3));
  // The input's gradient is the dequantized weight's, as without the fp8 GEMM.
  y.backward(g);
  CHECK(torch::equal(fp8_x.grad(), dense_x.grad()));
  // 15 rows are not _scaled_mm's multiple of 16: the weight is dequantized.
  CHECK(torch::equal(quantized_linear(odd, q, bias), dense_odd));
}

TEST_CASE("quantized weight on a GPU: the dequantize kernels give the CPU's values bit for bit, "
          "and fp8 storage under bf16 takes _scaled_mm on Ada and Hopper",
          "[precision][qlora][cuda]") {
  if (!torch::cuda::is_available()) {
    AMPT_SKIP(gpu, "no CUDA device: the GPU's dequantize kernels need one");
  }
  namespace kernels = ampt::kernels;
  const c10::Device gpu(c10::kCUDA, 0);
  REQUIRE(kernels::fused_path_runs(kernels::FusedPath::dequantize, gpu));
  torch::manual_seed(7);
  // 5632 x 2048 (a TinyLlama MLP weight) in bf16, as a base's is: many grid-stride steps.
  const auto w = (torch::randn({5632, 2048}) * 0.02).to(torch::kBFloat16);
  for (const auto format : {BaseDtype::nf4, BaseDtype::int8, BaseDtype::fp8}) {
    INFO(static_cast<int>(format));
    const QuantizedWeight on_cpu(w, format, torch::Device(torch::kCPU));
    const QuantizedWeight on_gpu(w, format, gpu);
    for (const auto dtype : {torch::kBFloat16, torch::kFloat32}) {
      CHECK(torch::equal(on_gpu.dequantize(dtype).cpu(), on_cpu.dequantize(dtype)));
    }
  }
  // 64 tokens through fp8 storage: _scaled_mm where the row-wise fp8 GEMM runs (x's e4m3
  // rounding, about 2% of each output's norm), else the dequantized GEMM.
  const auto q = c10::make_intrusive<QuantizedWeight>(w, BaseDtype::fp8, gpu);
  const auto x = torch::randn({4, 16, 2048}, torch::dtype(torch::kBFloat16).device(gpu));
  const auto y = quantized_linear(x, q, torch::Tensor());
  const auto dense = torch::nn::functional::linear(x.to(torch::kFloat),
                                                   q->dequantize(torch::kFloat));
  const double error = ((y.to(torch::kFloat) - dense).norm() / dense.norm()).item<double>();
  const bool scaled_mm = kernels::fused_path_runs(kernels::FusedPath::fp8_rowwise_gemm, gpu);
  INFO("relative error " << error << (scaled_mm ? " through _scaled_mm" : " dequantized"));
  CHECK(error < (scaled_mm ? 5e-2 : 1e-2));
}
