// Exact mode's kernels: a row's output is the same bits alone or among 1, 3 and 7 other rows of
// other lengths, padded, at 1 and 2 threads, in float32, bfloat16 and float16; a decode step's
// attention equals the prefill's row for its position; values and gradients agree with ATen's.
// And the negative controls: ATen's own linear and attention are not invariant here. The
// per-row operations exact mode leaves to ATen (the log-probability gather, RMSNorm, SiLU) are
// held to the same invariance.
#include "ampt/core/errors.h"
#include "ampt/kernels/batch_invariant.h"
#include "ampt/kernels/token_log_probs.h"
#include "ampt/models/llama.h"
#include "ampt/models/rotary.h"
#include "ampt/precision/autocast_guard.h"

#include <ATen/Parallel.h>
#include <catch2/catch.hpp>

#include <cstring>

#include <cmath>

#include <array>
#include <torch/torch.h>

#include <chrono>
#include <functional>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

using ampt::kernels::invariant_causal_attention;
using ampt::kernels::invariant_linear;

namespace {

const std::vector<c10::ScalarType> kDtypes{torch::kFloat32, torch::kBFloat16, torch::kFloat16};

// Runs `f` at `threads` intra-op threads, restoring the count.
template <class F>
auto at_threads(int threads, const F& f) {
  const int before = at::get_num_threads();
  at::set_num_threads(threads);
  auto out = f();
  at::set_num_threads(before);
  return out;
}

using RowFn = std::function<torch::Tensor(const torch::Tensor&)>;

// A target sequence x [1, T, width] alone, then as row `at` of a [1 + others, T', width] batch
// whose other rows hold other lengths (zero padding after each row's end, T' > T), then
// flattened as the trainer's [rows, width], at 1 and 2 threads: the cases where `f` (rows in,
// a result per row out) must give the target's rows the same bits. Returns how many of those
// cases did not (each named in the failure's messages).
int row_mismatches(const RowFn& f, c10::ScalarType dtype, int64_t length, int64_t width) {
  torch::manual_seed(11);
  const auto x = (torch::randn({1, length, width}) * 2).to(dtype);
  const auto alone = at_threads(1, [&] { return f(x); });
  int mismatches = 0;
  for (const int64_t others : {1, 3, 7}) {
    const int64_t time = length + others + 2;
    auto batch = torch::zeros({1 + others, time, width}, x.options());
    for (int64_t r = 0; r < 1 + others; ++r) {
      const int64_t len = 1 + (r * 5 + others) % time;
      batch[r].narrow(0, 0, len).copy_((torch::randn({len, width}) * 2).to(dtype));
    }
    const int64_t at = others / 2 + 1;
    batch[at].zero_();
    batch[at].narrow(0, 0, length).copy_(x[0]);
    for (const int threads : {1, 2}) {
      const auto three_d = at_threads(threads, [&] { return f(batch); });
      const auto flat = at_threads(threads, [&] { return f(batch.view({-1, width})); });
      const auto from_3d = three_d[at].narrow(0, 0, length);
      const auto from_flat = flat.narrow(0, at * time, length);
      for (const auto& [name, got] : {std::pair{"[B, T, width]", from_3d}, std::pair{"[rows, width]", from_flat}}) {
        if (!torch::equal(got, alone[0])) {
          ++mismatches;
          UNSCOPED_INFO(dtype << " " << name << " with " << others << " others at " << threads
                              << " threads: max difference "
                              << (got.to(torch::kFloat64) - alone[0].to(torch::kFloat64)).abs().max().item<double>());
        }
      }
    }
  }
  return mismatches;
}

// row_mismatches of a Linear [in] → [out] by `linear`, with random weights of `dtype`.
template <class Linear>
int linear_mismatches(const Linear& linear, c10::ScalarType dtype, int64_t length, int64_t in,
                      int64_t out) {
  torch::manual_seed(10);
  const auto weight = (torch::randn({out, in}) / std::sqrt(double(in))).to(dtype);
  const auto bias = torch::randn({out}).to(dtype);
  return row_mismatches([&](const torch::Tensor& x) { return linear(x, weight, bias); }, dtype,
                        length, in);
}

torch::Tensor aten_linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  return at::linear(x, w, b);
}

// Causal attention over each row's keys [start, position] (within `window` of the position,
// where it is not 0) by ATen's math, in float64: the reference values and gradients are compared
// against.
torch::Tensor reference_attention(const torch::Tensor& q, const torch::Tensor& k,
                                  const torch::Tensor& v, const torch::Tensor& start,
                                  int64_t window = 0) {
  const int64_t queries = q.size(2), keys = k.size(2), group = q.size(1) / k.size(1);
  const auto key = torch::arange(keys).view({1, 1, 1, keys});
  const auto position = torch::arange(keys - queries, keys).view({1, 1, queries, 1});
  const auto first = start.view({-1, 1, 1, 1});
  auto mask = key.le(position).logical_and(key.ge(first));
  if (window > 0) mask = mask.logical_and(key.gt(position - window));
  return at::scaled_dot_product_attention(q, k.repeat_interleave(group, 1),
                                          v.repeat_interleave(group, 1), mask);
}

struct Heads {
  int64_t heads = 4, kv_heads = 2, dim = 40;
};

// q [B, H, T, D], k and v [B, Hkv, T, D] of random values in `dtype`.
std::vector<torch::Tensor> random_qkv(int64_t batch, int64_t time, c10::ScalarType dtype,
                                      const Heads& h = {}) {
  return {torch::randn({batch, h.heads, time, h.dim}).to(dtype),
          torch::randn({batch, h.kv_heads, time, h.dim}).to(dtype),
          torch::randn({batch, h.kv_heads, time, h.dim}).to(dtype)};
}

}  // namespace

TEST_CASE("batch-invariant linear: a row's output alone and among 1, 3, 7 others, at 1 and 2 threads",
          "[kernels][batch_invariant]") {
  // 200 columns: six 32-column tiles and a partial one; rows: 5 (a tile and a partial one) and
  // 1 (a decode step).
  for (const auto dtype : kDtypes) {
    for (const int64_t length : {1, 5}) {
      INFO(dtype << ", " << length << " rows");
      CHECK(linear_mismatches(invariant_linear, dtype, length, 96, 200) == 0);
    }
  }
}

TEST_CASE("batch-invariant linear: each element is the documented sum, bit for bit, in every tile shape",
          "[kernels][batch_invariant]") {
  // The header's arithmetic by hand: 16 lanes over k mod 16 (one fused multiply-add each where
  // the CPU has FMA, the kernel's own rule), the last partial group padded with 0·0, the lanes
  // added pairwise (l + l+8, l + l+4, l + l+2, l + l+1), then the bias. Rows 9 and columns 11
  // put elements in whole 4 x 4 tiles, in partial ones and in the tail of the columns; in 37 a
  // partial last group of k.
  const bool fma = __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2");
  const int64_t rows = 9, in = 37, cols = 11;
  torch::manual_seed(3);
  const auto x = torch::randn({rows, in});
  const auto w = torch::randn({cols, in});
  const auto b = torch::randn({cols});
  torch::NoGradGuard no_grad;
  const auto y = invariant_linear(x, w, b);
  const auto xa = x.accessor<float, 2>(), wa = w.accessor<float, 2>();
  const auto ba = b.accessor<float, 1>();
  const auto ya = y.accessor<float, 2>();
  int64_t differing = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t n = 0; n < cols; ++n) {
      std::array<float, 16> lanes{};
      const int64_t padded = (in + 15) / 16 * 16;
      for (int64_t k = 0; k < padded; ++k) {
        const float xk = k < in ? xa[r][k] : 0.0F, wk = k < in ? wa[n][k] : 0.0F;
        float& lane = lanes[static_cast<size_t>(k % 16)];
        if (fma) {
          lane = std::fma(xk, wk, lane);
        } else {
          const volatile float product = xk * wk;  // rounded, not contracted
          lane = lane + product;
        }
      }
      for (int width = 8; width >= 1; width /= 2) {
        for (int l = 0; l < width; ++l) lanes[static_cast<size_t>(l)] += lanes[static_cast<size_t>(l + width)];
      }
      const float expected = lanes[0] + ba[n];
      differing += std::memcmp(&expected, &ya[r][n], sizeof expected) == 0 ? 0 : 1;
    }
  }
  CHECK(differing == 0);
}

TEST_CASE("batch-invariant linear: ATen's at::linear is not invariant on these shapes (negative control)",
          "[kernels][batch_invariant]") {
  // The cases above with 512 inputs: in float32 every one of them differs from the row alone
  // (MKL's GEMM for one row or five, against 16 to 112), natively and under
  // ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2. ATen's bfloat16 Linear (oneDNN) gave the
  // same bits at every shape tried here (in 256 to 4096, 1 row against 16 to 512), and float16's
  // differed at some natively (in 256, 64 rows) and at none under AVX2: no check for those.
  int mismatches = 0;
  for (const int64_t length : {1, 5}) {
    mismatches += linear_mismatches(aten_linear, torch::kFloat32, length, 512, 200);
  }
  CHECK(mismatches > 0);
}

TEST_CASE("batch-invariant linear: values as at::linear's, gradients as its backward's",
          "[kernels][batch_invariant]") {
  torch::manual_seed(12);
  const int64_t in = 96, out = 200;
  const auto x64 = torch::randn({3, 7, in}, torch::kFloat64);
  const auto w64 = torch::randn({out, in}, torch::kFloat64) / std::sqrt(double(in));
  const auto b64 = torch::randn({out}, torch::kFloat64);
  const auto g64 = torch::randn({3, 7, out}, torch::kFloat64);
  for (const auto dtype : kDtypes) {
    INFO(dtype);
    const auto x = x64.to(dtype).requires_grad_(true);
    const auto w = w64.to(dtype).requires_grad_(true);
    const auto b = b64.to(dtype).requires_grad_(true);
    const auto y = invariant_linear(x, w, b);
    CHECK(y.scalar_type() == dtype);
    CHECK(y.sizes() == torch::IntArrayRef({3, 7, out}));
    (y.to(torch::kFloat64) * g64).sum().backward();
    // The float64 product of the same (rounded) inputs, |y| up to 5.06: float32's sums of 96
    // products measured 1.51e-6 from it, ATen's the same 1.51e-6; a half result is one rounding
    // of it, within half an ulp at 4 to 8 (bfloat16 0.0156, measured 0.0134; float16 0.00195,
    // measured 0.00191, ATen's both the same).
    const auto exact = at::linear(x.detach().to(torch::kFloat64), w.detach().to(torch::kFloat64),
                                  b.detach().to(torch::kFloat64));
    const double tolerance = dtype == torch::kFloat32 ? 3e-6 : dtype == torch::kBFloat16 ? 1.6e-2 : 2e-3;
    CHECK((y.detach().to(torch::kFloat64) - exact).abs().max().item<double>() < tolerance);
    const auto xa = x.detach().clone().requires_grad_(true);
    const auto wa = w.detach().clone().requires_grad_(true);
    const auto ba = b.detach().clone().requires_grad_(true);
    (at::linear(xa, wa, ba).to(torch::kFloat64) * g64).sum().backward();
    // The backward is ATen's own GEMMs on the same operands.
    CHECK(torch::equal(x.grad(), xa.grad()));
    CHECK(torch::equal(w.grad(), wa.grad()));
    CHECK(torch::equal(b.grad(), ba.grad()));
  }
  // Without a bias, and under autocast (the fp32 arguments cast as autocast casts a Linear's).
  const auto x = x64.to(torch::kFloat32);
  const auto w = w64.to(torch::kFloat32).requires_grad_(true);
  torch::Tensor y;
  {
    ampt::precision::AutocastGuard autocast(torch::kCPU, torch::kBFloat16, true);
    y = invariant_linear(x, w, {});
  }
  CHECK(y.scalar_type() == torch::kBFloat16);
  CHECK(torch::equal(y, invariant_linear(x.to(torch::kBFloat16), w.detach().to(torch::kBFloat16), {})));
  y.to(torch::kFloat32).sum().backward();
  CHECK(w.grad().scalar_type() == torch::kFloat32);
}

TEST_CASE("batch-invariant attention: a query's output alone, among 1, 3, 7 others, left- or right-padded, and in decode steps",
          "[kernels][batch_invariant]") {
  const int64_t length = 9;
  for (const auto dtype : kDtypes) {
    torch::manual_seed(13);
    const auto qkv = random_qkv(1, length, dtype);
    const auto& q = qkv[0];
    const auto& k = qkv[1];
    const auto& v = qkv[2];
    const auto alone = at_threads(1, [&] { return invariant_causal_attention(q, k, v); });
    // Each position as a decode step against the cache of the keys up to it.
    for (int64_t t = 0; t < length; ++t) {
      INFO(dtype << " decode at position " << t);
      const auto step = invariant_causal_attention(q.narrow(2, t, 1), k.narrow(2, 0, t + 1),
                                                   v.narrow(2, 0, t + 1));
      CHECK(torch::equal(step[0].select(1, 0), alone[0].select(1, t)));
    }
    for (const int64_t others : {1, 3, 7}) {
      const int64_t time = length + others;
      const int64_t at = others / 2 + 1;
      const auto batch = random_qkv(1 + others, time, dtype);
      auto start = torch::randint(0, time - 1, {1 + others}, torch::kInt64);
      // Left padding: the target's sequence ends at the last position; right padding (the
      // trainer's): it starts at 0.
      for (const bool left : {true, false}) {
        const int64_t offset = left ? time - length : 0;
        start[at] = offset;
        if (!left) start.zero_();
        std::vector<torch::Tensor> padded;
        for (size_t i = 0; i < 3; ++i) {
          padded.push_back(batch[i].clone());
          padded[i][at].narrow(1, offset, length).copy_(qkv[i][0]);
        }
        for (const int threads : {1, 2}) {
          INFO(dtype << ", " << others << " others, " << (left ? "left" : "right") << " padding, "
                     << threads << " threads");
          const auto prefill = at_threads(threads, [&] {
            return invariant_causal_attention(padded[0], padded[1], padded[2], start);
          });
          CHECK(torch::equal(prefill[at].narrow(1, offset, length), alone[0]));
          // A padding query gets zeros.
          if (offset > 0) CHECK(prefill[at].narrow(1, 0, offset).abs().max().item<double>() == 0.0);
          if (!left) continue;
          // The batch's last decode step: every row's newest query against its cache.
          const auto step = at_threads(threads, [&] {
            return invariant_causal_attention(padded[0].narrow(2, time - 1, 1), padded[1],
                                              padded[2], start);
          });
          CHECK(torch::equal(step[at].select(1, 0), alone[0].select(1, length - 1)));
        }
      }
    }
  }
}

TEST_CASE("batch-invariant attention: ATen's scaled_dot_product_attention is not invariant here (negative control)",
          "[kernels][batch_invariant]") {
  // A decode step (one query against its cache) against the prefill's row for that position:
  // over 40 positions, 16 bfloat16 and 29 float16 ones differed natively (12 and 31 under AVX2)
  // and 39 float32 ones (measured in Python, on other random inputs).
  const int64_t length = 40;
  for (const auto dtype : kDtypes) {
    torch::manual_seed(14);
    const auto qkv = random_qkv(1, length, dtype, {4, 4, 64});
    const auto prefill = at::scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], {}, 0.0, true);
    int mismatches = 0;
    for (int64_t t = 0; t < length; ++t) {
      const auto step = at::scaled_dot_product_attention(
          qkv[0].narrow(2, t, 1), qkv[1].narrow(2, 0, t + 1), qkv[2].narrow(2, 0, t + 1));
      mismatches += torch::equal(step.select(2, 0), prefill.select(2, t)) ? 0 : 1;
    }
    INFO(dtype);
    CHECK(mismatches > 0);
  }
}

TEST_CASE("batch-invariant attention: values as ATen's attention under the same mask, gradients as its backward's",
          "[kernels][batch_invariant]") {
  torch::manual_seed(15);
  const int64_t batch = 3, time = 11;
  const auto start = torch::tensor({0, 4, 10}, torch::kInt64);
  const auto qkv64 = random_qkv(batch, time, torch::kFloat64);
  const auto g64 = torch::randn({batch, 4, time, 40}, torch::kFloat64);
  const auto valid = torch::arange(time).view({1, 1, time, 1}).ge(start.view({-1, 1, 1, 1}));
  for (const auto dtype : kDtypes) {
    INFO(dtype);
    std::vector<torch::Tensor> ours, reference;
    for (const auto& t : qkv64) {
      ours.push_back(t.to(dtype).requires_grad_(true));
      reference.push_back(t.to(dtype).to(torch::kFloat64).requires_grad_(true));
    }
    const auto y = invariant_causal_attention(ours[0], ours[1], ours[2], start);
    CHECK(y.scalar_type() == dtype);
    (y.to(torch::kFloat64) * g64).sum().backward();
    const auto expected = reference_attention(reference[0], reference[1], reference[2], start) * valid;
    (expected * g64).sum().backward();
    // Against float64 on the same rounded inputs, |y| up to 2.67: float32 measured 2.8e-7 (ATen's
    // SDPA 3.1e-7); a half output is one rounding of it, within half an ulp at 2 to 4 (bfloat16
    // 0.0078, measured 0.00765; float16 0.00098, measured 0.00083; ATen's the same).
    const double tolerance = dtype == torch::kFloat32 ? 1e-6 : dtype == torch::kBFloat16 ? 8e-3 : 1e-3;
    CHECK((y.detach().to(torch::kFloat64) - expected.detach()).abs().max().item<double>() < tolerance);
    // Gradients from float32 math attention: in float32 within 8 float32 epsilons of the largest
    // (|g| up to 4.8, measured 6.1e-7 = 1.1 eps·|g|); in half precision the incoming gradient is
    // rounded to the dtype (autograd's cast) and the result once more, so within one epsilon of
    // the dtype (bfloat16 2^-7 · 4.8 = 0.037, measured 0.0154; float16 2^-10 · 4.8 = 0.0047,
    // measured 0.0021).
    const double epsilon = dtype == torch::kFloat32 ? 8 * 1.1920929e-7 : dtype == torch::kBFloat16 ? 0.0078125 : 0.0009765625;
    for (size_t i = 0; i < 3; ++i) {
      INFO("gradient " << i);
      CHECK(ours[i].grad().scalar_type() == dtype);
      const double largest = reference[i].grad().abs().max().item<double>();
      CHECK((ours[i].grad().to(torch::kFloat64) - reference[i].grad()).abs().max().item<double>() <
            epsilon * largest);
    }
  }
}

TEST_CASE("batch-invariant attention: a sliding window's query is the same bits in the prefill, against every key and against its window alone",
          "[kernels][batch_invariant]") {
  torch::manual_seed(16);
  const int64_t batch = 3, time = 13, window = 4;
  const auto start = torch::tensor({0, 5, 11}, torch::kInt64);
  const auto valid = torch::arange(time).view({1, 1, time, 1}).ge(start.view({-1, 1, 1, 1}));
  const auto qkv64 = random_qkv(batch, time, torch::kFloat64);
  for (const auto dtype : kDtypes) {
    INFO(dtype);
    std::vector<torch::Tensor> qkv, reference;
    for (const auto& t : qkv64) {
      qkv.push_back(t.to(dtype).requires_grad_(dtype == torch::kFloat32));
      reference.push_back(t.to(dtype).to(torch::kFloat64).requires_grad_(true));
    }
    const auto& q = qkv[0];
    const auto& k = qkv[1];
    const auto& v = qkv[2];
    const auto prefill = invariant_causal_attention(q, k, v, start, std::nullopt, window);
    // A decode step over every key held, and over only the window a trimmed cache keeps.
    for (int64_t t = 0; t < time; ++t) {
      INFO("position " << t);
      // A row's start past the keys held (its padding still) is where they end.
      const auto step = invariant_causal_attention(q.narrow(2, t, 1), k.narrow(2, 0, t + 1),
                                                   v.narrow(2, 0, t + 1), start.clamp_max(t + 1),
                                                   std::nullopt, window);
      CHECK(torch::equal(step.select(2, 0), prefill.select(2, t)));
      const int64_t from = std::max<int64_t>(0, t + 1 - window);
      const auto trimmed = invariant_causal_attention(
          q.narrow(2, t, 1), k.narrow(2, from, t + 1 - from), v.narrow(2, from, t + 1 - from),
          (start - from).clamp(0, t + 1 - from), std::nullopt, window);
      CHECK(torch::equal(trimmed.select(2, 0), prefill.select(2, t)));
    }
    // The window is kept: past it, row 0's queries differ from full causal attention's.
    const auto full = invariant_causal_attention(q, k, v, start);
    CHECK(torch::equal(full.narrow(2, 0, window), prefill.narrow(2, 0, window)));
    for (int64_t t = window; t < time; ++t) CHECK_FALSE(torch::equal(full[0].select(1, t), prefill[0].select(1, t)));
    // Values (and in float32 gradients) as float64 math under the banded mask, to the
    // tolerances of the full attention's test above.
    const auto expected = reference_attention(reference[0], reference[1], reference[2], start, window) * valid;
    const double tolerance = dtype == torch::kFloat32 ? 1e-6 : dtype == torch::kBFloat16 ? 8e-3 : 1e-3;
    CHECK((prefill.detach().to(torch::kFloat64) - expected.detach()).abs().max().item<double>() < tolerance);
    if (dtype != torch::kFloat32) continue;
    const auto g64 = torch::randn({batch, 4, time, 40}, torch::kFloat64);
    (prefill.to(torch::kFloat64) * g64).sum().backward();
    (expected * g64).sum().backward();
    for (size_t i = 0; i < 3; ++i) {
      INFO("gradient " << i);
      const double largest = reference[i].grad().abs().max().item<double>();
      CHECK((qkv[i].grad().to(torch::kFloat64) - reference[i].grad()).abs().max().item<double>() <
            8 * 1.1920929e-7 * largest);
    }
  }
}

TEST_CASE("batch-invariant: ATen's log-probability gather, the models' RMSNorm and SiLU are row-invariant already",
          "[kernels][batch_invariant]") {
  // Measured before writing kernels for them (ATen 2.11, AVX-512 and ATEN_CPU_CAPABILITY=avx2):
  // each row is reduced by one thread in an order fixed by its width, and the elementwise
  // functions give a vector's tail the vector's arithmetic, so nothing depends on the batch or
  // the threads. (torch.sigmoid does not: its short tails differ, but no model calls it.) A
  // vocabulary of 50257 puts one row past ATen's 32768-element grain, where a reduction could
  // split across threads.
  const auto log_probs = [](const torch::Tensor& x) {
    const auto rows = x.reshape({-1, x.size(-1)});
    const auto targets = rows.argmax(-1);
    return ampt::kernels::token_log_probs(rows, targets).view(x.sizes().slice(0, x.dim() - 1));
  };
  const auto log_softmax = [](const torch::Tensor& x) {
    return x.to(torch::kFloat32).log_softmax(-1).gather(-1, x.argmax(-1, true)).squeeze(-1);
  };
  ampt::models::RmsNorm norm(256, 1e-6);
  {
    torch::NoGradGuard no_grad;
    norm->weight.copy_(torch::rand({256}) + 0.5);
  }
  const auto rms_norm = [&](const torch::Tensor& x) { return norm->forward(x); };
  const auto silu_mul = [](const torch::Tensor& x) { return torch::silu(x) * x.flip(-1); };
  for (const auto dtype : kDtypes) {
    INFO(dtype);
    CHECK(row_mismatches(log_probs, dtype, 5, 50257) == 0);
    CHECK(row_mismatches(log_softmax, dtype, 5, 50257) == 0);
    CHECK(row_mismatches(rms_norm, dtype, 5, 256) == 0);
    CHECK(row_mismatches(silu_mul, dtype, 5, 688) == 0);
  }
  // The rotary angles of a decode step's one position are the prefill's at that position.
  const auto inv_freq = 1.0 / torch::pow(10000.0, torch::arange(0, 64, 2).to(torch::kFloat32) / 64);
  const auto prefill = ampt::models::rotary_angles(inv_freq, 0, 300);
  int differing = 0;
  for (int64_t p = 0; p < 300; ++p) {
    const auto step = ampt::models::rotary_angles(inv_freq, p, 1);
    differing += torch::equal(step.cos[0], prefill.cos[p]) && torch::equal(step.sin[0], prefill.sin[p]) ? 0 : 1;
  }
  CHECK(differing == 0);
}

TEST_CASE("batch-invariant kernels: exact mode's switch, and one line for what they refuse",
          "[kernels][batch_invariant]") {
  CHECK_FALSE(ampt::kernels::batch_invariant());
  {
    const ampt::kernels::BatchInvariantScope on;
    CHECK(ampt::kernels::batch_invariant());
    {
      const ampt::kernels::BatchInvariantScope off(false);
      CHECK_FALSE(ampt::kernels::batch_invariant());
    }
    CHECK(ampt::kernels::batch_invariant());
  }
  CHECK_FALSE(ampt::kernels::batch_invariant());

  const auto w = torch::randn({8, 4});
  // A meta tensor stands for a GPU's here: anything but the CPU is refused alike.
  const auto elsewhere = torch::empty({2, 4}, torch::TensorOptions().device(torch::kMeta));
  CHECK_THROWS_MATCHES(invariant_linear(elsewhere, w, {}), ampt::UsageError,
                       Catch::Matchers::Message("exact mode: the batch-invariant linear got x on meta, but "
                                      "its kernels run on the CPU only so far (a CUDA version is "
                                      "not written yet)"));
  CHECK_THROWS_WITH(invariant_linear(torch::ones({2, 4}, torch::kInt64), w, {}),
                    Catch::StartsWith("batch-invariant linear: x is Long; float32, bfloat16 or "
                                      "float16 are allowed"));
  CHECK_THROWS_WITH(invariant_linear(torch::ones({2, 4}), w.to(torch::kBFloat16), {}),
                    Catch::StartsWith("batch-invariant linear: weight is BFloat16 where the first "
                                      "input is Float"));
  CHECK_THROWS_WITH(invariant_linear(torch::ones({2, 5}), w, {}),
                    Catch::StartsWith("batch-invariant linear: x [2, 5] and weight [8, 4] do not match"));
  const auto qkv = random_qkv(2, 3, torch::kFloat32);
  CHECK_THROWS_WITH(invariant_causal_attention(qkv[0], qkv[1], qkv[2], torch::tensor({0, 4})),
                    Catch::StartsWith("batch-invariant attention: key_start[1] is 4; 0 to the 3 "
                                      "keys are allowed"));
  CHECK_THROWS_WITH(invariant_causal_attention(qkv[0], qkv[1].narrow(2, 0, 2), qkv[2]),
                    Catch::StartsWith("batch-invariant attention: q [2, 4, 3, 40], k [2, 2, 2, 40] "
                                      "and v [2, 2, 3, 40] do not fit"));
}

// Not a test: the time of the invariant Linear against at::linear at a tiny Llama's shapes, for
// the report (`ampt_torch_tests "[bench]"`).
TEST_CASE("batch-invariant linear: time against at::linear", "[.][bench]") {
  torch::NoGradGuard no_grad;
  const auto seconds = [](const std::function<void()>& f) {
    for (int i = 0; i < 3; ++i) f();
    int runs = 0;
    const auto start = std::chrono::steady_clock::now();
    double elapsed = 0;
    do {
      f();
      ++runs;
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    } while (elapsed < 0.2);
    return elapsed / runs;
  };
  std::cout << "dtype threads hidden rows out  at::linear_us invariant_us ratio\n";
  for (const auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    for (const int threads : {1, 2}) {
      at::set_num_threads(threads);
      for (const int64_t hidden : {64, 256}) {
        for (const int64_t rows : {1, 8, 64, 512}) {
          for (const int64_t out : {hidden, 3 * hidden}) {
            const auto x = torch::randn({rows, hidden}).to(dtype);
            const auto w = torch::randn({out, hidden}).to(dtype);
            const double aten = seconds([&] { at::linear(x, w, {}); });
            const double ours = seconds([&] { invariant_linear(x, w, {}); });
            std::cout << dtype << " " << threads << " " << hidden << " " << rows << " " << out << " "
                      << aten * 1e6 << " " << ours * 1e6 << " " << ours / aten << "\n";
          }
        }
      }
    }
  }
}
