// fp8 quantisation: the ATen path against a plain per-element reference (c10's scalar fp8
// conversions) and delayed scaling's bookkeeping worked out by hand; on a GPU the CUDA kernels
// against the ATen path bit for bit, and the delayed pass captured in a CUDA graph.
#include "ampt/kernels/fp8_gemm.h"
#include "ampt/kernels/fp8_quantize.h"

#include "support/fp8_reference.h"
#include "support/skip.h"

#include <ATen/cuda/CUDAGraph.h>
#include <ATen/ops/_scaled_mm.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>

using ampt::kernels::cast_fp8;
using ampt::kernels::cast_fp8_rowwise;
using ampt::kernels::Fp8Format;
using ampt::kernels::Fp8History;
using ampt::kernels::scale_from_amax;

using ampt::test::bits;
using ampt::test::kAll;
using ampt::test::kE4m3;
using ampt::test::kE5m2;

namespace {

// The fp8 bits of clamp(v · scale, ±max), rounded to nearest even by c10's scalar conversion.
uint8_t fp8_bits(float v, float scale, c10::ScalarType dtype) {
  const float max = dtype == kE5m2 ? 57344.0f : 448.0f;
  const float s = std::clamp(v * scale, -max, max);
  return dtype == kE5m2 ? c10::Float8_e5m2(s).x : c10::Float8_e4m3fn(s).x;
}

// Per element: x [rows, cols] (any float dtype, read as float) times row_scale[r] · col_scale[c].
torch::Tensor reference_bits(const torch::Tensor& x, const std::vector<float>& row_scale,
                             const std::vector<float>& col_scale, c10::ScalarType dtype) {
  const auto xf = x.to(torch::kFloat32).contiguous();
  const auto a = xf.accessor<float, 2>();
  auto out = torch::empty(xf.sizes(), torch::kUInt8);
  auto o = out.accessor<uint8_t, 2>();
  for (int64_t r = 0; r < xf.size(0); ++r) {
    for (int64_t c = 0; c < xf.size(1); ++c) o[r][c] = fp8_bits(a[r][c], row_scale[r] * col_scale[c], dtype);
  }
  return out;
}


torch::Tensor with_amax(double amax, const torch::Device& device = torch::kCPU) {
  auto t = torch::full({16, 16}, 0.25 * amax, torch::dtype(torch::kFloat32).device(device));
  t[3][5] = -amax;
  return t;
}

float value(const torch::Tensor& t) { return t.item<float>(); }

}  // namespace

TEST_CASE("fp8 cast: both copies equal the per-element reference, saturating",
          "[kernels][fp8]") {
  torch::manual_seed(3);
  for (const auto input : {torch::kFloat32, torch::kBFloat16}) {
    for (const auto dtype : {kE4m3, kE5m2}) {
      INFO("input " << input << ", " << dtype);
      auto x = (torch::randn({32, 48}) * 5).to(input);
      x[0][0] = 1e6;  // beyond both formats' range at this scale: saturates
      x[7][9] = -1e6;
      const float s = 37.5f;
      const auto scale = torch::full({}, s);
      const auto cast = cast_fp8(x, scale, Fp8Format{dtype, 0}, {}, nullptr);
      const auto expected = reference_bits(x, std::vector<float>(32, s), std::vector<float>(48, 1.0f),
                                           dtype);
      CHECK(torch::equal(bits(cast.data), expected));
      CHECK(torch::equal(bits(cast.transposed), expected.t()));
      CHECK(cast.data.to(torch::kFloat32)[0][0].item<double>() == Fp8Format{dtype, 0}.max());
      CHECK(cast.data.to(torch::kFloat32)[7][9].item<double>() == -Fp8Format{dtype, 0}.max());
      CHECK(value(cast.inverse) == 1.0f / s);
      // Copies not asked for are not made.
      const auto only_t = cast_fp8(x, scale, Fp8Format{dtype, 0}, {.data = false, .transposed = true}, nullptr);
      CHECK_FALSE(only_t.data.defined());
      CHECK_FALSE(only_t.column_sums.defined());
      CHECK(torch::equal(bits(only_t.transposed), expected.t()));
      // Column sums, asked for, are the input's own (a bias's gradient), unscaled.
      const auto sums = cast_fp8(x, scale, Fp8Format{dtype, 0},
                                 {.data = false, .transposed = false, .column_sums = true}, nullptr);
      CHECK(torch::equal(sums.column_sums, x.sum(0, false, torch::kFloat32)));
    }
  }
}

TEST_CASE("fp8 delayed bookkeeping: the ring, the scale used and the next one", "[kernels][fp8]") {
  // margin 1: scales are 448 / 2 / amax = 224 / amax.
  const Fp8Format format{kE4m3, 1};
  auto history = Fp8History::zeros(3, /*use_max=*/true, torch::kCPU);
  struct Call {
    double amax;
    float used, next;
    std::vector<float> ordered;  // TransformerEngine's layout: latest first, then oldest on
  };
  const std::vector<Call> calls = {
      {2, 1.0f, 224.0f / 2, {2, 0, 0}},   // the initial scale 1; then from max {2}
      {8, 112.0f, 224.0f / 8, {8, 0, 2}},
      {4, 28.0f, 224.0f / 8, {4, 2, 8}},
      {1, 28.0f, 224.0f / 8, {1, 8, 4}},  // 2 leaves the ring, 8 is still in it
      {1, 28.0f, 224.0f / 4, {1, 4, 1}},  // now 8 has left
  };
  for (size_t i = 0; i < calls.size(); ++i) {
    INFO("call " << i + 1);
    const auto x = with_amax(calls[i].amax);
    const auto cast = cast_fp8(x, history.scale, format, {.data = true, .transposed = false}, &history);
    CHECK(value(cast.inverse) == 1.0f / calls[i].used);
    const auto expected = reference_bits(x, std::vector<float>(16, calls[i].used),
                                         std::vector<float>(16, 1.0f), kE4m3);
    CHECK(torch::equal(bits(cast.data), expected));
    CHECK(value(history.last_scale) == calls[i].used);
    CHECK(value(history.scale) == calls[i].next);
    CHECK(torch::equal(history.ordered(), torch::tensor(calls[i].ordered)));
  }

  // most_recent: the next scale from the call's own amax; a zero, infinite or NaN amax keeps it.
  auto recent = Fp8History::zeros(2, /*use_max=*/false, torch::kCPU);
  cast_fp8(with_amax(8), recent.scale, format, {.data = true, .transposed = false}, &recent);
  cast_fp8(with_amax(2), recent.scale, format, {.data = true, .transposed = false}, &recent);
  CHECK(value(recent.scale) == 112.0f);
  for (const double bad : {0.0, std::numeric_limits<double>::infinity(),
                           std::numeric_limits<double>::quiet_NaN()}) {
    INFO("amax " << bad);
    cast_fp8(with_amax(bad), recent.scale, format, {.data = true, .transposed = false}, &recent);
    CHECK(value(recent.scale) == 112.0f);
    CHECK(value(recent.last_scale) == 112.0f);
  }
  CHECK(std::isnan(value(recent.ordered()[0])));  // the NaN was recorded as it was
}

TEST_CASE("fp8 current scaling's first pass: scale from the tensor's own amax", "[kernels][fp8]") {
  const auto scratch = torch::zeros({2}, torch::kInt32);
  const auto scale = torch::ones({});
  const auto amax = torch::zeros({});
  scale_from_amax(with_amax(4), scale, Fp8Format{kE5m2, 2}, amax, scratch);
  CHECK(value(scale) == 57344.0f / 4 / 4);
  CHECK(value(amax) == 4.0f);
  scale_from_amax(with_amax(0), scale, Fp8Format{kE5m2, 2}, amax, scratch);
  CHECK(value(scale) == 57344.0f / 4 / 4);  // amax 0: kept
  CHECK(value(amax) == 0.0f);
  scale_from_amax(with_amax(1), scale, Fp8Format{kE4m3, 0}, torch::Tensor(), scratch);
  CHECK(value(scale) == 448.0f);
}

TEST_CASE("fp8 cast prologues: GPT-2's GELU and its gradient, then cast as they are",
          "[kernels][fp8]") {
  using P = ampt::kernels::Fp8CastSpec::Prologue;
  const std::vector<double> xs = {-6.0, -3.0, -1.0, -0.25, 0.0, 0.5, 1.0, 2.5};
  const auto x = torch::tensor(xs, torch::kFloat32).view({1, 8}).to(torch::kBFloat16);
  const auto gelu = [](double v) {
    return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
  };
  const auto values = ampt::kernels::fp8_cast_values(x, {.prologue = P::gelu_tanh});
  const auto dy = torch::full({1, 8}, 3.0, torch::kBFloat16);
  const auto grads =
      ampt::kernels::fp8_cast_values(dy, {.prologue = P::gelu_tanh_grad, .pre = x});
  CHECK(values.dtype() == torch::kFloat32);
  for (int64_t i = 0; i < 8; ++i) {
    const double v = x[0][i].item<double>();  // as rounded to bfloat16
    INFO("x " << v);
    CHECK(values[0][i].item<double>() == Approx(gelu(v)).margin(1e-6));
    // dy · GELU'(x), against a central difference of the formula.
    const double h = 1e-5, derivative = (gelu(v + h) - gelu(v - h)) / (2 * h);
    CHECK(grads[0][i].item<double>() == Approx(3 * derivative).margin(1e-5));
  }
  CHECK(grads[0][4].item<double>() == 1.5);  // GELU'(0) = 1/2

  // The cast quantises those values, records their amax and sums their columns.
  const Fp8Format format{kE4m3, 0};
  auto history = Fp8History::zeros(2, true, torch::kCPU);
  const auto cast =
      cast_fp8(dy, history.scale, format,
               {.column_sums = true, .prologue = P::gelu_tanh_grad, .pre = x}, &history);
  const auto plain = cast_fp8(grads, torch::ones({}), format, {}, nullptr);
  CHECK(torch::equal(bits(cast.data), bits(plain.data)));
  CHECK(torch::equal(bits(cast.transposed), bits(plain.transposed)));
  CHECK(value(history.ordered()[0]) == grads.abs().max().item<float>());
  CHECK(torch::equal(cast.column_sums, grads.sum(0)));
}

TEST_CASE("fp8 row-wise cast: power-of-two scales per row and per column", "[kernels][fp8]") {
  torch::manual_seed(4);
  auto x = torch::randn({16, 32}) * torch::logspace(-3, 3, 32).unsqueeze(0);
  x[5].zero_();  // an all-zero row keeps scale 1
  const auto cast = cast_fp8_rowwise(x.to(torch::kBFloat16), Fp8Format{kE4m3, 0});
  const auto xb = x.to(torch::kBFloat16).to(torch::kFloat32);
  const auto pow2 = [](float amax) {
    const float s = 448.0f / amax;
    return std::isfinite(s) && s > 0 ? std::ldexp(1.0f, std::ilogb(s)) : 1.0f;
  };
  std::vector<float> row(16), col(32), ones_r(16, 1.0f), ones_c(32, 1.0f);
  for (int64_t r = 0; r < 16; ++r) row[r] = pow2(xb[r].abs().max().item<float>());
  for (int64_t c = 0; c < 32; ++c) col[c] = pow2(xb.select(1, c).abs().max().item<float>());
  CHECK(row[5] == 1.0f);
  CHECK(torch::equal(bits(cast.data), reference_bits(xb, row, ones_c, kE4m3)));
  CHECK(torch::equal(bits(cast.transposed), reference_bits(xb, ones_r, col, kE4m3).t()));
  for (int64_t r = 0; r < 16; ++r) CHECK(cast.inverse[r].item<float>() == 1.0f / row[r]);
  for (int64_t c = 0; c < 32; ++c) CHECK(cast.transposed_inverse[c].item<float>() == 1.0f / col[c]);
  // Each row's largest value lands in [224, 448]: the format's top octave, not more than 2x short.
  const auto top = cast.data.to(torch::kFloat32).abs().amax(1);
  for (int64_t r = 0; r < 16; ++r) {
    if (r != 5) CHECK((top[r].item<float>() >= 224.0f && top[r].item<float>() <= 448.0f));
  }
}

TEST_CASE("fp8 gemm: PyTorch's _scaled_mm product, per-row factors too, its layout rules",
          "[kernels][fp8]") {
  torch::manual_seed(6);
  const auto a = (torch::randn({32, 48}) * 4).to(kE4m3);
  const auto b = (torch::randn({16, 48}) * 4).to(kE5m2);  // b's rows: columns of the product
  const auto half = torch::full({}, 0.5f), quarter = torch::full({}, 0.25f);
  // On a CPU fp8_gemm computes what the CPU's own _scaled_mm does, without its 0.3 s a call.
  for (const auto out : {torch::kFloat32, torch::kBFloat16}) {
    const auto bias = out == torch::kBFloat16 ? torch::randn({16}).to(out) : torch::Tensor();
    const auto mine = ampt::kernels::fp8_gemm(a, b.t(), half, quarter, bias, out, false);
    const auto theirs = at::_scaled_mm(a, b.t(), half, quarter,
                                       bias.defined() ? std::optional<torch::Tensor>(bias)
                                                      : std::nullopt,
                                       {}, out, false);
    CHECK(mine.scalar_type() == out);
    CHECK(torch::allclose(mine.to(torch::kFloat32), theirs.to(torch::kFloat32), 1e-6, 1e-6));
  }
  // Per-row factors: row i of a times ra[i], column j of the product times rb[j].
  const auto ra = torch::rand({32}) + 0.5, rb = torch::rand({16}) + 0.5;
  const auto per_row = ampt::kernels::fp8_gemm(a, b.t(), ra, rb, {}, torch::kFloat32, false);
  const auto plain = torch::mm(a.to(torch::kFloat32), b.to(torch::kFloat32).t());
  CHECK(torch::allclose(per_row, plain * ra.unsqueeze(1) * rb.unsqueeze(0), 1e-5, 1e-4));
  // As on a GPU: the first operand row-major, the second column-major.
  CHECK_THROWS_WITH(ampt::kernels::fp8_gemm(a.t().contiguous().t(), b.t(), half, quarter, {},
                                            torch::kFloat32, false),
                    Catch::Contains("a must be row-major and b column-major"));
  CHECK_THROWS(ampt::kernels::fp8_gemm(a, b.t().contiguous(), half, quarter, {}, torch::kFloat32,
                                       false));
}

TEST_CASE("fp8 CUDA kernels equal the ATen path bit for bit", "[kernels][fp8][cuda]") {
  if (!torch::cuda::is_available()) {
    AMPT_SKIP(gpu, "no CUDA device: the fp8 quantisation kernels need one");
  }
  torch::manual_seed(7);
  const torch::Device gpu(torch::kCUDA, 0);
  // One tile, tiles cut at the edges (80 = 64 + 16), and a grid of hundreds of blocks.
  for (const auto& shape : {std::vector<int64_t>{16, 16}, {48, 80}, {1040, 1600}}) {
    for (const auto input : {torch::kFloat32, torch::kBFloat16, torch::kHalf}) {
      for (const auto dtype : {kE4m3, kE5m2}) {
        INFO(shape[0] << "x" << shape[1] << " " << input << " -> " << dtype);
        const Fp8Format format{dtype, 1};
        auto kernel = Fp8History::zeros(4, true, gpu);
        auto aten = Fp8History::zeros(4, true, gpu);
        for (int call = 0; call < 3; ++call) {
          const auto x = (torch::randn(shape, torch::dtype(input).device(gpu)) * (call + 1) * 3);
          const auto k = cast_fp8(x, kernel.scale, format, kAll, &kernel, true);
          const auto a = cast_fp8(x, aten.scale, format, kAll, &aten, false);
          CHECK(torch::equal(bits(k.data), bits(a.data)));
          CHECK(torch::equal(bits(k.transposed), bits(a.transposed)));
          CHECK(torch::equal(k.inverse, a.inverse));
          // The column sums in another order: within float32 roundings of the largest sum.
          const double tol = 1e-6 * x.size(0) * x.abs().max().item<double>();
          INFO("column sums' largest difference "
               << (k.column_sums - a.column_sums).abs().max().item<double>());
          CHECK(torch::allclose(k.column_sums, a.column_sums, 0.0, tol));
          CHECK(torch::equal(kernel.amaxes, aten.amaxes));
          CHECK(torch::equal(kernel.newest, aten.newest));
          CHECK(torch::equal(kernel.scale, aten.scale));
          CHECK(torch::equal(kernel.last_scale, aten.last_scale));
          CHECK(torch::equal(kernel.scratch.cpu(), torch::zeros({2}, torch::kInt32)));

          const auto ks = torch::ones({}, torch::dtype(torch::kFloat32).device(gpu));
          const auto as = ks.clone();
          const auto k_amax = torch::zeros_like(ks), a_amax = torch::zeros_like(ks);
          scale_from_amax(x, ks, format, k_amax, kernel.scratch, {}, true);
          scale_from_amax(x, as, format, a_amax, kernel.scratch, {}, false);
          CHECK(torch::equal(ks, as));
          CHECK(torch::equal(k_amax, a_amax));

          const auto kr = cast_fp8_rowwise(x, format, true);
          const auto ar = cast_fp8_rowwise(x, format, false);
          CHECK(torch::equal(bits(kr.data), bits(ar.data)));
          CHECK(torch::equal(bits(kr.transposed), bits(ar.transposed)));
          CHECK(torch::equal(kr.inverse, ar.inverse));
          CHECK(torch::equal(kr.transposed_inverse, ar.transposed_inverse));
        }
      }
    }
  }
  // The GELU and its gradient computed in the cast: CUDA's tanhf against ATen's.
  using P = ampt::kernels::Fp8CastSpec::Prologue;
  for (const auto input : {torch::kBFloat16, torch::kHalf}) {
    for (const auto dtype : {kE4m3, kE5m2}) {
      for (const auto prologue : {P::gelu_tanh, P::gelu_tanh_grad}) {
        INFO(input << " -> " << dtype << (prologue == P::gelu_tanh ? ", GELU" : ", GELU's gradient"));
        const auto x = (torch::randn({1040, 1600}, torch::dtype(input).device(gpu)) * 2);
        ampt::kernels::Fp8CastSpec spec = kAll;
        spec.prologue = prologue;
        if (prologue == P::gelu_tanh_grad) spec.pre = torch::randn_like(x) * 2;
        const Fp8Format format{dtype, 0};
        const auto ks = torch::ones({}, torch::dtype(torch::kFloat32).device(gpu));
        const auto as = ks.clone();
        auto kh = Fp8History::zeros(1, true, gpu), ah = Fp8History::zeros(1, true, gpu);
        scale_from_amax(x, ks, format, {}, kh.scratch, spec, true);
        scale_from_amax(x, as, format, {}, ah.scratch, spec, false);
        CHECK(torch::allclose(ks, as, 1e-6, 0.0));
        const auto k = cast_fp8(x, as, format, spec, &kh, true);
        const auto a = cast_fp8(x, as, format, spec, &ah, false);
        ampt::test::check_fp8_close(k, a, dtype, ah.amaxes[0].item<double>());
        CHECK(torch::allclose(kh.amaxes, ah.amaxes, 1e-6, 0.0));
        CHECK(torch::allclose(k.column_sums, a.column_sums, 1e-4,
                              1e-5 * a.column_sums.abs().max().item<double>()));
      }
    }
  }

  // A NaN reaches the ring and leaves the scale as it was, in both.
  auto kernel = Fp8History::zeros(2, true, gpu);
  auto x = torch::ones({32, 32}, torch::dtype(torch::kBFloat16).device(gpu));
  cast_fp8(x, kernel.scale, Fp8Format{kE4m3, 0}, {}, &kernel, true);
  x[4][7] = std::numeric_limits<float>::quiet_NaN();
  cast_fp8(x, kernel.scale, Fp8Format{kE4m3, 0}, {}, &kernel, true);
  CHECK(value(kernel.scale) == 448.0f);
  CHECK(std::isnan(value(kernel.ordered()[0])));
}

TEST_CASE("fp8 delayed cast replays in a CUDA graph: no host reads", "[kernels][fp8][cuda]") {
  if (!torch::cuda::is_available()) {
    AMPT_SKIP(gpu, "no CUDA device: CUDA graphs need one");
  }
  const torch::Device gpu(torch::kCUDA, 0);
  const Fp8Format format{kE4m3, 0};
  const auto input = torch::empty({64, 128}, torch::dtype(torch::kBFloat16).device(gpu));
  auto graphed = Fp8History::zeros(8, true, gpu);
  auto eager = Fp8History::zeros(8, true, gpu);
  ampt::kernels::Fp8Cast out;
  at::cuda::CUDAGraph graph;
  {
    const auto side = c10::cuda::getStreamFromPool();
    c10::cuda::CUDAStreamGuard guard(side);
    input.fill_(1.0);
    cast_fp8(input, graphed.scale, format, {}, &graphed);  // warm-up, outside the graph
    graph.capture_begin();
    out = cast_fp8(input, graphed.scale, format, {}, &graphed);
    graph.capture_end();
  }
  torch::cuda::synchronize();
  cast_fp8(torch::ones_like(input), eager.scale, format, {}, &eager, false);
  for (int step = 1; step <= 4; ++step) {
    INFO("replay " << step);
    input.copy_(torch::randn(input.sizes(), input.options()) * step);
    graph.replay();
    const auto reference = cast_fp8(input, eager.scale, format, {}, &eager, false);
    CHECK(torch::equal(bits(out.data), bits(reference.data)));
    CHECK(torch::equal(bits(out.transposed), bits(reference.transposed)));
    CHECK(torch::equal(graphed.scale, eager.scale));
    CHECK(torch::equal(graphed.ordered(), eager.ordered()));
  }
}
