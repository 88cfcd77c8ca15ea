// The fp8 quantisation kernels (src/ampt/kernels/cuda/fp8_quantize.cu) emulated on the CPU
// against the ATen path of kernels/fp8_quantize bit for bit: both copies, the factors, delayed
// scaling's ring and next scale, current scaling's amax pass and the row-wise pair of passes, on
// one tile, tiles cut at the edges and several blocks finishing one grid-wide amax; and the
// column sums the same pass gives a bias's gradient.
#include "ampt/kernels/fp8_quantize.h"

#include "cuda_emulated/launch.h"
#include "kernels/cuda/kernel_checks.h"
#include "support/fp8_reference.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <limits>

using ampt::kernels::cast_fp8;
using ampt::kernels::cast_fp8_rowwise;
using ampt::kernels::Fp8Cast;
using ampt::kernels::Fp8CastSpec;
using ampt::kernels::Fp8Format;
using ampt::kernels::Fp8History;
using ampt::kernels::scale_from_amax;
using ampt::test::check_close;
using ampt::test::Guarded;
using ampt::test::emulated_dtype;
using ampt::test::bits;
using ampt::test::kAll;
using ampt::test::kE4m3;
using ampt::test::kE5m2;
namespace emulated = ampt::kernels::cuda_emulated;

namespace {


emulated::Fp8Dtype emulated_fp8(const Fp8Format& format) {
  return format.dtype == kE5m2 ? emulated::Fp8Dtype::e5m2 : emulated::Fp8Dtype::e4m3;
}

float max_over_headroom(const Fp8Format& format) {
  return static_cast<float>(format.max_over_headroom());
}

uint32_t* bits_of(const torch::Tensor& int32) {
  return reinterpret_cast<uint32_t*>(int32.data_ptr<int32_t>());
}

emulated::Fp8Input input_of(const torch::Tensor& x, const Fp8CastSpec& spec = {}) {
  using P = Fp8CastSpec::Prologue;
  const auto prologue = spec.prologue == P::gelu_tanh        ? emulated::Fp8Prologue::gelu_tanh
                        : spec.prologue == P::gelu_tanh_grad ? emulated::Fp8Prologue::gelu_tanh_grad
                                                             : emulated::Fp8Prologue::none;
  return {x.data_ptr(), emulated_dtype(x.scalar_type()), prologue,
          spec.pre.defined() ? spec.pre.data_ptr() : nullptr};
}

// The emulated kernel on x's memory, with `history`'s tensors as its bookkeeping.
Fp8Cast emulated_cast(const torch::Tensor& x, const torch::Tensor& scale, const Fp8Format& format,
                      const Fp8CastSpec& spec, Fp8History* history) {
  const int64_t rows = x.size(0), cols = x.size(1);
  Guarded data({rows, cols}, format.dtype, "data"), transposed({cols, rows}, format.dtype, "transposed");
  Guarded inverse({}, torch::kFloat32, "inverse");
  Guarded partials({emulated::fp8_column_partial_rows(rows), cols}, torch::kFloat32, "partials");
  emulated::Fp8ScaleUpdate update{};
  if (history) {
    update = {history->scale.data_ptr<float>(), history->last_scale.data_ptr<float>(),
              history->amaxes.data_ptr<float>(), history->newest.data_ptr<int32_t>(),
              history->amaxes.size(0),          history->use_max,
              max_over_headroom(format),         bits_of(history->scratch)};
  }
  emulated::fp8_cast_transpose(input_of(x, spec), rows, cols, scale.data_ptr<float>(), emulated_fp8(format),
                               spec.data ? data.data() : nullptr,
                               spec.transposed ? transposed.data() : nullptr, inverse.data<float>(),
                               spec.column_sums ? partials.data<float>() : nullptr,
                               history ? &update : nullptr, nullptr);
  Fp8Cast out;
  if (spec.data) out.data = data.get();
  if (spec.transposed) out.transposed = transposed.get();
  out.inverse = inverse.get();
  if (spec.column_sums) out.column_sums = partials.get().sum(0);
  return out;
}

Fp8Cast emulated_rowwise(const torch::Tensor& x, const Fp8Format& format) {
  const int64_t rows = x.size(0), cols = x.size(1);
  const auto amaxes = torch::zeros({rows + cols}, torch::kInt32);
  emulated::fp8_rowwise_amax(x.data_ptr(), emulated_dtype(x.scalar_type()), rows, cols, bits_of(amaxes),
                             bits_of(amaxes) + rows, nullptr);
  Guarded data({rows, cols}, format.dtype, "data"), transposed({cols, rows}, format.dtype, "transposed");
  Guarded row_inverse({rows}, torch::kFloat32, "row inverses");
  Guarded col_inverse({cols}, torch::kFloat32, "column inverses");
  emulated::fp8_rowwise_cast_transpose(x.data_ptr(), emulated_dtype(x.scalar_type()), rows, cols, bits_of(amaxes),
                                       bits_of(amaxes) + rows, max_over_headroom(format),
                                       emulated_fp8(format), data.data(), transposed.data(),
                                       row_inverse.data<float>(), col_inverse.data<float>(),
                                       nullptr);
  return {data.get(), transposed.get(), row_inverse.get(), col_inverse.get(), torch::Tensor()};
}


void check_same_history(const Fp8History& emulated, const Fp8History& aten) {
  CHECK(torch::allclose(emulated.amaxes, aten.amaxes, 0.0, 0.0, /*equal_nan=*/true));
  CHECK(torch::equal(emulated.newest, aten.newest));
  CHECK(torch::equal(emulated.scale, aten.scale));
  CHECK(torch::equal(emulated.last_scale, aten.last_scale));
  CHECK(torch::equal(emulated.scratch, torch::zeros({2}, torch::kInt32)));
}

}  // namespace

TEST_CASE("fp8 quantisation kernels, emulated, equal the ATen path bit for bit",
          "[kernels][emulated]") {
  torch::manual_seed(7);
  // One tile; tiles cut at the edges (80 = 64 + 16); 3 x 4 blocks, whose amax pass takes 2.
  for (const auto& shape : {std::vector<int64_t>{16, 16}, {48, 80}, {144, 208}}) {
    for (const auto input : {torch::kFloat32, torch::kBFloat16, torch::kHalf}) {
      for (const auto dtype : {kE4m3, kE5m2}) {
        INFO(shape[0] << "x" << shape[1] << " " << input << " -> " << dtype);
        const Fp8Format format{dtype, 1};
        // A ring of 2 that 3 calls wrap around; the first call's history has a zero in it.
        auto emulated = Fp8History::zeros(2, true, torch::kCPU);
        auto aten = Fp8History::zeros(2, true, torch::kCPU);
        for (int call = 0; call < 3; ++call) {
          INFO("call " << call + 1);
          // An outlier beyond the format at the scale used (saturation), finite in float16.
          auto x = torch::randn(shape) * (call + 1) * 3;
          x[1][2] = 2e4 * (call + 1);
          const auto xin = x.to(input);
          const auto e = emulated_cast(xin, emulated.scale, format, kAll, &emulated);
          const auto a = cast_fp8(xin, aten.scale, format, kAll, &aten, false);
          CHECK(torch::equal(bits(e.data), bits(a.data)));
          CHECK(torch::equal(bits(e.transposed), bits(a.transposed)));
          CHECK(torch::equal(e.inverse, a.inverse));
          check_same_history(emulated, aten);
          // Float sums in another order: within a few float32 roundings of the largest term.
          check_close(e.column_sums, a.column_sums.to(torch::kFloat64),
                      1e-6 * x.abs().max().item<double>(), "column sums");

          const auto es = torch::ones({}), as = torch::ones({});
          const auto e_amax = torch::zeros({}), a_amax = torch::zeros({});
          const auto scratch = torch::zeros({2}, torch::kInt32);
          emulated::fp8_scale_from_amax(input_of(xin), xin.numel(),
                                        max_over_headroom(format), es.data_ptr<float>(),
                                        e_amax.data_ptr<float>(), bits_of(scratch), nullptr);
          scale_from_amax(xin, as, format, a_amax, scratch, {}, false);
          CHECK(torch::equal(es, as));
          CHECK(torch::equal(e_amax, a_amax));
          CHECK(torch::equal(scratch, torch::zeros({2}, torch::kInt32)));

          const auto er = emulated_rowwise(xin, format);
          const auto ar = cast_fp8_rowwise(xin, format, false);
          CHECK(torch::equal(bits(er.data), bits(ar.data)));
          CHECK(torch::equal(bits(er.transposed), bits(ar.transposed)));
          CHECK(torch::equal(er.inverse, ar.inverse));
          CHECK(torch::equal(er.transposed_inverse, ar.transposed_inverse));
        }
      }
    }
  }
}

TEST_CASE("fp8 quantisation kernels, emulated: one output alone, the latest amax, a NaN",
          "[kernels][emulated]") {
  torch::manual_seed(8);
  const auto x = (torch::randn({48, 80}) * 4).to(torch::kBFloat16);
  const Fp8Format format{kE4m3, 0};
  const auto scale = torch::full({}, 20.0f);
  const auto both = cast_fp8(x, scale, format, {}, nullptr, false);
  const auto data = emulated_cast(x, scale, format, {.data = true, .transposed = false}, nullptr);
  CHECK_FALSE(data.transposed.defined());
  CHECK(torch::equal(bits(data.data), bits(both.data)));
  const auto transposed = emulated_cast(x, scale, format, {.data = false, .transposed = true}, nullptr);
  CHECK_FALSE(transposed.data.defined());
  CHECK(torch::equal(bits(transposed.transposed), bits(both.transposed)));
  // A bias's gradient alone: neither copy, the column sums.
  const auto sums = emulated_cast(x, scale, format, {.data = false, .transposed = false, .column_sums = true}, nullptr);
  CHECK_FALSE(sums.data.defined());
  CHECK_FALSE(sums.transposed.defined());
  check_close(sums.column_sums, x.sum(0, false, torch::kFloat64), 1e-5, "column sums alone");

  // The next scale from each call's own amax (use_max false).
  auto emulated = Fp8History::zeros(3, false, torch::kCPU);
  auto aten = Fp8History::zeros(3, false, torch::kCPU);
  for (const double magnitude : {8.0, 2.0, 0.5}) {
    INFO("magnitude " << magnitude);
    const auto xm = x * magnitude;
    emulated_cast(xm, emulated.scale, format, {.data = true, .transposed = false}, &emulated);
    cast_fp8(xm, aten.scale, format, {.data = true, .transposed = false}, &aten, false);
    check_same_history(emulated, aten);
  }

  // A NaN reaches the ring and leaves the scale as it was; the data holds the format's NaN.
  auto nan = x.clone();
  nan[4][7] = std::numeric_limits<float>::quiet_NaN();
  const auto e = emulated_cast(nan, emulated.scale, format, {}, &emulated);
  const auto a = cast_fp8(nan, aten.scale, format, {}, &aten, false);
  CHECK(torch::equal(bits(e.data), bits(a.data)));
  check_same_history(emulated, aten);
  CHECK(std::isnan(emulated.ordered()[0].item<float>()));
}

TEST_CASE("fp8 quantisation kernels, emulated: a grid beyond CUDA's limits is refused",
          "[kernels][emulated]") {
  // 64 rows a block along gridDim.y, at most 65535 blocks: what kernels/fp8_quantize.cpp keeps
  // away from the kernel. No memory is touched: the launch fails first.
  const auto scale = torch::ones({});
  CHECK_THROWS_WITH(emulated::fp8_cast_transpose({nullptr, emulated::Dtype::bfloat16},
                                                 64 * int64_t{65536}, 16, scale.data_ptr<float>(),
                                                 emulated::Fp8Dtype::e4m3, nullptr, nullptr,
                                                 nullptr, nullptr, nullptr, nullptr),
                    "fp8_cast_transpose kernel launch: invalid configuration argument");
}

TEST_CASE("fp8 cast prologues, emulated: the GELU and its gradient computed in the cast",
          "[kernels][emulated]") {
  torch::manual_seed(9);
  using P = Fp8CastSpec::Prologue;
  for (const auto input : {torch::kBFloat16, torch::kHalf, torch::kFloat32}) {
    for (const auto dtype : {kE4m3, kE5m2}) {
      for (const auto prologue : {P::gelu_tanh, P::gelu_tanh_grad}) {
        INFO(input << " -> " << dtype << (prologue == P::gelu_tanh ? ", GELU" : ", GELU's gradient"));
        const auto x = (torch::randn({144, 208}) * 2).to(input);
        Fp8CastSpec spec = kAll;
        spec.prologue = prologue;
        if (prologue == P::gelu_tanh_grad) spec.pre = (torch::randn({144, 208}) * 2).to(input);
        const Fp8Format format{dtype, 0};

        // The amax pass of current scaling sees the prologue's values.
        const auto es = torch::ones({}), as = torch::ones({});
        const auto scratch = torch::zeros({2}, torch::kInt32);
        emulated::fp8_scale_from_amax(input_of(x, spec), x.numel(), max_over_headroom(format),
                                      es.data_ptr<float>(), nullptr, bits_of(scratch), nullptr);
        scale_from_amax(x, as, format, {}, scratch, spec, false);
        check_close(es, as.to(torch::kFloat64), 1e-6, "scale from the prologue's amax");

        // The host's tanhf against ATen's vectorised tanh (tests/support/fp8_reference.h).
        auto emulated = Fp8History::zeros(2, true, torch::kCPU);
        auto aten = Fp8History::zeros(2, true, torch::kCPU);
        const auto e = emulated_cast(x, as, format, spec, &emulated);
        const auto a = cast_fp8(x, as, format, spec, &aten, false);
        ampt::test::check_fp8_close(e, a, dtype, aten.amaxes[0].item<double>());
        check_close(emulated.amaxes, aten.amaxes.to(torch::kFloat64), 1e-6, "recorded amax");
        check_close(e.column_sums, a.column_sums.to(torch::kFloat64),
                    1e-5 * a.column_sums.abs().max().item<double>(), "column sums");
      }
    }
  }
}
