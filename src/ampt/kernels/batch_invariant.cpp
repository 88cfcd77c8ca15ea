#include "ampt/kernels/batch_invariant.h"

#include "ampt/core/autocast_dtype.h"
#include "ampt/core/errors.h"
#include "ampt/kernels/fused_linear.h"

#include <ATen/Parallel.h>
#include <ATen/ops/gelu_backward.h>
#include <ATen/ops/silu_backward.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/accumulate.h>
#include <fmt/format.h>
#include <torch/autograd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string_view>
#include <utility>
#include <vector>

// The kernels' arithmetic is their contract (batch_invariant.h): GCC contracts a·b + c into a
// fused multiply-add by default in C++ wherever the target has one (the AVX-512 clone, not the
// AVX2 or plain x86-64 ones), which would make the bits depend on the CPU. The attention and the
// elementwise functions are compiled without contraction; the Linear (its own region below) with
// it, on every CPU with FMA. Only raw-pointer code between push and pop, which calls nothing but
// memcpy and itself, so that no inline function of another setting has to be inlined into it.
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")

namespace ampt::kernels {
namespace {

// 16 floats, GCC's vector type: one zmm register in the AVX-512 clone, two ymm or four xmm in the
// others. Lanes are independent: each computes its element as a scalar loop would.
using Lanes16 = float __attribute__((vector_size(64)));
constexpr int64_t kLanes16 = 16;

// Through memory, not by value: passing a 64-byte vector would change with the ISA. (Always
// inlined, also into the Linear's region below, whose contraction setting differs.)
__attribute__((always_inline)) inline void load16(Lanes16& v, const float* p) { std::memcpy(&v, p, sizeof v); }

// exp_fixed's arithmetic for a float or 16 lanes alike: x = n·ln2 + r, n an integer, and p the
// polynomial in r whose product with 2^n is e^x (out-parameters: a 64-byte vector returned by
// value would change with the ISA).
template <class T>
__attribute__((always_inline)) inline void exp_reduced(const T& x, T& n, T& p) {
  constexpr float kLog2e = 1.44269504088896341F;
  constexpr float kRound = 12582912.0F;  // 1.5·2^23: adding it rounds to an integer
  n = (x * kLog2e + kRound) - kRound;
  // ln 2 in two parts, the first with few enough bits that n times it is exact.
  const T r = (x - n * 0.693359375F) - n * -2.12194440e-4F;
  p = T{} + 1.9875691500e-4F;
  p = p * r + 1.3981999507e-3F;
  p = p * r + 8.3334519073e-3F;
  p = p * r + 4.1665795894e-2F;
  p = p * r + 1.6666665459e-1F;
  p = p * r + 5.0000001201e-1F;
  p = (p * (r * r) + r) + 1.0F;
}

// e^x for x ≤ 0 from multiplications and additions alone (Cephes' expf: x = n·ln2 + r with
// |r| ≤ ln2/2, a degree-7 polynomial in r, times 2^n), so that a GPU kernel can compute the
// same bits, which it could not from glibc's expf or CUDA's. Below −87, where 2^n would leave
// float32's normal range, 0 (e^−87 ≈ 1.6e-38: nothing a sum of exponentials that holds e^0 = 1
// can notice).
inline float exp_fixed(float x) {
  if (!(x >= -87.0F)) return x != x ? x : 0.0F;
  float n, p;
  exp_reduced(x, n, p);
  const auto bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return p * two_n;
}

// The activations' scalar functions, each from exp_fixed of a non-positive argument alone.
inline float sigmoid_fixed(float x) {
  if (x >= 0.0F) return 1.0F / (1.0F + exp_fixed(-x));
  const float e = exp_fixed(x);
  return e / (1.0F + e);
}

inline float silu_fixed(float x) { return x * sigmoid_fixed(x); }

// tanh(u) = sign(u)·(1 − e^(−2|u|)) / (1 + e^(−2|u|)).
inline float tanh_fixed(float u) {
  const float e = exp_fixed(-2.0F * (u < 0.0F ? -u : u));
  const float t = (1.0F - e) / (1.0F + e);
  return u < 0.0F ? -t : t;
}

// GPT-2's GELU: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), as ATen's "tanh" approximation.
inline float gelu_tanh_fixed(float x) {
  constexpr float kBeta = 0.7978845608028654F;  // √(2/π)
  const float inner = kBeta * (x + 0.044715F * (x * x * x));
  return 0.5F * x * (1.0F + tanh_fixed(inner));
}

// erf by Abramowitz and Stegun 7.1.26 (|error| ≤ 1.5e-7, about 2 float32 ulps of 1): 1 − (a1·t
// + … + a5·t⁵)·e^(−x²), t = 1/(1 + p·|x|), odd in x.
inline float erf_fixed(float x) {
  const float a = x < 0.0F ? -x : x;
  const float t = 1.0F / (1.0F + 0.3275911F * a);
  float p = 1.061405429F;
  p = p * t - 1.453152027F;
  p = p * t + 1.421413741F;
  p = p * t - 0.284496736F;
  p = p * t + 0.254829592F;
  const float y = 1.0F - (p * t) * exp_fixed(-(a * a));
  return x < 0.0F ? -y : y;
}

// The exact GELU 0.5·x·(1 + erf(x/√2)).
inline float gelu_erf_fixed(float x) {
  constexpr float kInvSqrt2 = 0.7071067811865476F;
  return 0.5F * x * (1.0F + erf_fixed(x * kInvSqrt2));
}

using Ints16 = int32_t __attribute__((vector_size(64)));

// exp_fixed of 16 lanes at once, in place, branch-free, each lane exactly the scalar's arithmetic.
__attribute__((always_inline)) inline void exp_fixed16(Lanes16& x) {
  const Ints16 in_range = x >= -87.0F;  // false for NaN too
  const Ints16 nan = x != x;
  const Lanes16 low = Lanes16{} - 87.0F;
  const Lanes16 y = in_range ? x : low;
  Lanes16 n, p;
  exp_reduced(y, n, p);
  const Ints16 bits = (__builtin_convertvector(n, Ints16) + 127) << 23;
  Lanes16 two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  const Lanes16 e = p * two_n;
  const Lanes16 zero{};
  x = nan ? x : (in_range ? e : zero);
}

// log Σ_j e^(x_j) of one row of n floats: its max m, then e^(x_j − m) summed in 16 lanes, lane
// j mod 16 taking x_j in ascending j, the lanes then added 0 to 15, and m + log of that.
inline float logsumexp_fixed(const float* x, int64_t n) {
  float top = x[0];
  for (int64_t j = 1; j < n; ++j) top = x[j] > top ? x[j] : top;
  if (!(top > -std::numeric_limits<float>::infinity()) || top == std::numeric_limits<float>::infinity()) {
    return top;  // all −inf, a +inf, or a NaN: as logsumexp gives them
  }
  Lanes16 lanes{};
  const Lanes16 shift = Lanes16{} + top;
  int64_t j = 0;
  for (; j + kLanes16 <= n; j += kLanes16) {
    Lanes16 v;
    load16(v, x + j);
    v -= shift;
    exp_fixed16(v);
    lanes += v;
  }
  if (j < n) {
    // The last lanes past the row take e^(−inf) = 0.
    float rest[kLanes16];
    for (int64_t l = 0; l < kLanes16; ++l) rest[l] = j + l < n ? x[j + l] : -std::numeric_limits<float>::infinity();
    Lanes16 v;
    load16(v, rest);
    v -= shift;
    exp_fixed16(v);
    lanes += v;
  }
  float total = 0.0F;
  for (int64_t l = 0; l < kLanes16; ++l) total += lanes[l];
  return top + std::log(total);
}

struct AttentionOperands {
  const float* q;       // [B, H, Tq, D]
  const float* kt;      // [B, Hkv, D, padded_keys]: the keys transposed, zero past Tk
  const float* v;       // [B, Hkv, Tk, Dv]
  const int64_t* start;  // [B]
  float* out;           // [B, H, Tq, Dv]
  int64_t heads, kv_heads, queries, keys, padded_keys, dim, value_dim;
  int64_t window;  // 0: every key up to the query's own
  float scale;
};

// One query's output; `scores` holds padded_keys floats. The scores go 16 keys at a time (each
// lane its key's sum over d), and past the query's last key into the zero padding, never used.
__attribute__((target_clones("avx512f", "avx2", "default"))) void attention_query(
    const AttentionOperands& a, int64_t item, float* scores) {
  const int64_t i = item % a.queries;
  const int64_t row_head = item / a.queries;
  const int64_t b = row_head / a.heads;
  const int64_t kv = b * a.kv_heads + (row_head % a.heads) / (a.heads / a.kv_heads);
  const float* q = a.q + item * a.dim;
  float* o = a.out + item * a.value_dim;
  const int64_t last = a.keys - a.queries + i;
  if (last < a.start[b]) {
    std::memset(o, 0, static_cast<size_t>(a.value_dim) * sizeof(float));
    return;
  }
  const int64_t first = a.window > 0 ? std::max(a.start[b], last - a.window + 1) : a.start[b];
  const float* kt = a.kt + kv * a.dim * a.padded_keys;
  for (int64_t j = first; j <= last; j += kLanes16) {
    Lanes16 s{};
    for (int64_t d = 0; d < a.dim; ++d) {
      Lanes16 key;
      load16(key, kt + d * a.padded_keys + j);
      s += q[d] * key;
    }
    s *= a.scale;
    std::memcpy(scores + j, &s, sizeof s);
  }
  float top = scores[first];
  for (int64_t j = first + 1; j <= last; ++j) top = scores[j] > top ? scores[j] : top;
  float total = 0.0F;
  for (int64_t j = first; j <= last; ++j) {
    scores[j] = exp_fixed(scores[j] - top);
    total += scores[j];
  }
  const float* v = a.v + kv * a.keys * a.value_dim;
  int64_t c = 0;
  for (; c + kLanes16 <= a.value_dim; c += kLanes16) {
    Lanes16 acc{};
    for (int64_t j = first; j <= last; ++j) {
      Lanes16 value;
      load16(value, v + j * a.value_dim + c);
      acc += scores[j] * value;
    }
    acc /= total;
    std::memcpy(o + c, &acc, sizeof acc);
  }
  for (; c < a.value_dim; ++c) {
    float acc = 0.0F;
    for (int64_t j = first; j <= last; ++j) acc += scores[j] * v[j * a.value_dim + c];
    o[c] = acc / total;
  }
}

enum class Activation { silu, gelu_tanh, gelu_erf };

// y[i] = f(x[i]) for i in [begin, end): each element alone, the same bits wherever it lies.
void activation_range(Activation f, const float* x, float* y, int64_t begin, int64_t end) {
  switch (f) {
    case Activation::silu:
      for (int64_t i = begin; i < end; ++i) y[i] = silu_fixed(x[i]);
      return;
    case Activation::gelu_tanh:
      for (int64_t i = begin; i < end; ++i) y[i] = gelu_tanh_fixed(x[i]);
      return;
    case Activation::gelu_erf:
      for (int64_t i = begin; i < end; ++i) y[i] = gelu_erf_fixed(x[i]);
      return;
  }
}

}  // namespace
}  // namespace ampt::kernels

#pragma GCC pop_options

// The Linear: each lane's a·b + c one fused multiply-add where the CPU has FMA (every AVX2 and
// AVX-512 one, and CUDA's fmaf): as fast as a GEMM can be, and the same bits in the sampler and the
// trainer, which run on one CPU. Without FMA (the x86-64 baseline) a·b rounded, then added.
#pragma GCC push_options
#pragma GCC optimize("fp-contract=fast")

namespace ampt::kernels {
namespace {

// The Linear's weights as the kernel reads them, 16 consecutive ones at a time widened to
// float32 (exactly): float32 as they are; bfloat16 stored; float32 rounded to bfloat16 first
// (autocast's cast of an fp32 weight, c10's round-to-nearest-even, done here instead of in a
// bfloat16 copy of the whole weight every call).
using Bits16 = uint32_t __attribute__((vector_size(64)));
using Halves16 = uint16_t __attribute__((vector_size(32)));

struct Fp32Weights {
  const float* w;
  void load(Lanes16& v, int64_t at) const { std::memcpy(&v, w + at, sizeof v); }
  float one(int64_t at) const { return w[at]; }
  void prefetch(int64_t at) const { __builtin_prefetch(w + at); }
};

struct Bf16Weights {
  const uint16_t* w;
  void load(Lanes16& v, int64_t at) const {
    Halves16 h;
    std::memcpy(&h, w + at, sizeof h);
    const Bits16 bits = __builtin_convertvector(h, Bits16) << 16U;
    std::memcpy(&v, &bits, sizeof v);
  }
  float one(int64_t at) const {
    const uint32_t bits = static_cast<uint32_t>(w[at]) << 16U;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  void prefetch(int64_t at) const { __builtin_prefetch(w + at); }
};

inline uint32_t round_to_bf16_bits(uint32_t bits) {
  if ((bits & 0x7FFFFFFFU) > 0x7F800000U) return 0x7FC00000U;  // NaN
  return (bits + 0x7FFFU + ((bits >> 16U) & 1U)) & 0xFFFF0000U;
}

struct Fp32AsBf16Weights {
  const float* w;
  void load(Lanes16& v, int64_t at) const {
    Bits16 bits;
    std::memcpy(&bits, w + at, sizeof bits);
    const Bits16 nan = (bits & 0x7FFFFFFFU) > 0x7F800000U;  // all ones where NaN
    const Bits16 rounded = (bits + 0x7FFFU + ((bits >> 16U) & 1U)) & 0xFFFF0000U;
    const Bits16 out = (rounded & ~nan) | ((Bits16{} + 0x7FC00000U) & nan);
    std::memcpy(&v, &out, sizeof v);
  }
  float one(int64_t at) const {
    uint32_t bits;
    std::memcpy(&bits, w + at, sizeof bits);
    bits = round_to_bf16_bits(bits);
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  void prefetch(int64_t at) const { __builtin_prefetch(w + at); }
};

// The 16 lanes added pairwise, as a warp's shuffle-down reduction adds them: lane l + lane l+8,
// then l + l+4 of those, then l + l+2, then l + l+1; lane 0 holds the total.
using Index16 = int32_t __attribute__((vector_size(64)));

__attribute__((always_inline)) inline float lane_sum(Lanes16 v) {
  v += __builtin_shuffle(v, Index16{8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15});
  v += __builtin_shuffle(v, Index16{4, 5, 6, 7, 4, 5, 6, 7, 4, 5, 6, 7, 4, 5, 6, 7});
  v += __builtin_shuffle(v, Index16{2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3});
  v += __builtin_shuffle(v, Index16{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
  return v[0];
}

// lane_sum of 16 vectors at once, each total by the same pairwise tree: every step adds the two
// halves of each lane group of two vectors (width 8, then 4, 2, 1) into one vector holding both
// vectors' groups, so that 15 shuffled additions do what 16 lane_sums do in 64.
__attribute__((always_inline)) inline void halves_add(Lanes16& out, const Lanes16& a, const Lanes16& b,
                                                      const Index16& low, const Index16& high) {
  const Lanes16 sum = __builtin_shuffle(a, b, low) + __builtin_shuffle(a, b, high);
  out = sum;
}

// Which lane of lane_sums16's last vector holds input vector i's total: its steps followed on the
// vectors' numbers (each step interleaves the two vectors' groups, first's then second's).
constexpr std::array<int, kLanes16> total_lanes() {
  std::array<std::array<int, kLanes16>, kLanes16> groups{};
  for (int i = 0; i < kLanes16; ++i) groups[i][0] = i;
  for (int count = kLanes16, per = 1; count > 1; count /= 2, per *= 2) {
    std::array<std::array<int, kLanes16>, kLanes16> next{};
    for (int i = 0; i < count / 2; ++i) {
      for (int g = 0; g < per; ++g) {
        next[i][2 * g] = groups[2 * i][g];
        next[i][2 * g + 1] = groups[2 * i + 1][g];
      }
    }
    groups = next;
  }
  std::array<int, kLanes16> lane{};
  for (int l = 0; l < kLanes16; ++l) lane[groups[0][l]] = l;
  return lane;
}

// lane_sum of a tile's 16 accumulators at once, acc[i][j] (R x C = 16), into one vector whose
// lane C·i + j holds acc[i][j]'s total: each vector enters the tree at the position whose total
// lands in that lane. The steps' masks: the first halves of each group of the two vectors (first's,
// then second's), and the second halves (the same lanes + width).
template <int R, int C>
__attribute__((always_inline)) inline void lane_sums16(const Lanes16 (&acc)[R][C], Lanes16& totals) {
  static_assert(R * C == kLanes16);
  const Index16 low8{0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23};
  const Index16 low4{0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27};
  const Index16 low2{0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29};
  const Index16 low1{0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30};
  const Index16 high8 = low8 + 8, high4 = low4 + 4, high2 = low2 + 2, high1 = low1 + 1;
  constexpr auto lane_of = total_lanes();
  Lanes16 v[kLanes16];
#pragma GCC unroll 16
  for (int i = 0; i < kLanes16; ++i) v[i] = acc[lane_of[i] / C][lane_of[i] % C];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) halves_add(v[i], v[2 * i], v[2 * i + 1], low8, high8);
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) halves_add(v[i], v[2 * i], v[2 * i + 1], low4, high4);
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i) halves_add(v[i], v[2 * i], v[2 * i + 1], low2, high2);
  halves_add(totals, v[0], v[1], low1, high1);
}

struct LinearOperands {
  const float* x;     // [rows, in] float32
  const float* bias;  // [cols] float32, or null
  float* y;           // [rows, cols]
  int64_t rows, in, cols;
};

// A tile's outputs that fall inside y, total(i, j) + the bias.
template <int R, int C, class Total>
__attribute__((always_inline)) inline void store_tile(const LinearOperands& a, int64_t r0, int64_t n0,
                                                      const Total& total) {
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
    if (r0 + i >= a.rows) break;
    float* y = a.y + (r0 + i) * a.cols;
#pragma GCC unroll 8
    for (int j = 0; j < C; ++j) {
      if (n0 + j >= a.cols) break;
      y[n0 + j] = a.bias != nullptr ? total(i, j) + a.bias[n0 + j] : total(i, j);
    }
  }
}

// Outputs (r0.., n0..) of an R x C tile: element (r, n) is the 16 lanes' sums, lane l of
// x[r, k]·w[n, k] over the k ≡ l (mod 16) ascending (a last partial group of k padded with
// 0·0), the lanes then added pairwise (lane_sum), then the bias. Rows and columns past the last read the last (their results are dropped), so an
// element's arithmetic does not depend on the tile it falls in, nor the tile's shape on anything
// but the CPU (every shape gives the same bits).
template <int R, int C, bool Fetch, class Weights>
__attribute__((always_inline)) inline void linear_tile(const LinearOperands& a, const Weights& w,
                                                       int64_t r0, int64_t n0) {
  const float* x[R];
  int64_t wrow[C], next[C];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) x[i] = a.x + (r0 + i < a.rows ? r0 + i : a.rows - 1) * a.in;
#pragma GCC unroll 8
  for (int j = 0; j < C; ++j) {
    wrow[j] = (n0 + j < a.cols ? n0 + j : a.cols - 1) * a.in;
    next[j] = (n0 + C + j < a.cols ? n0 + C + j : a.cols - 1) * a.in;
  }
  Lanes16 acc[R][C] = {};
  const int64_t whole = a.in / kLanes16 * kLanes16;
  for (int64_t k = 0; k < whole; k += kLanes16) {
    Lanes16 xv[R], wv[C];
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) load16(xv[i], x[i] + k);
#pragma GCC unroll 8
    for (int j = 0; j < C; ++j) w.load(wv[j], wrow[j] + k);
    if constexpr (Fetch) {
#pragma GCC unroll 8
      for (int j = 0; j < C; ++j) w.prefetch(next[j] + k);
    }
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
#pragma GCC unroll 8
      for (int j = 0; j < C; ++j) acc[i][j] += xv[i] * wv[j];
    }
  }
  if (whole < a.in) {
    // The last group of fewer than 16 k, zero-padded: the missing lanes add 0·0. (Not lane by
    // lane: indexing the accumulators at run time would keep them in memory, not registers.)
    const int64_t rest = a.in - whole;
    Lanes16 xv[R], wv[C];
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      float t[kLanes16] = {};
      std::memcpy(t, x[i] + whole, static_cast<size_t>(rest) * sizeof(float));
      load16(xv[i], t);
    }
#pragma GCC unroll 8
    for (int j = 0; j < C; ++j) {
      float t[kLanes16] = {};
      for (int64_t l = 0; l < rest; ++l) t[l] = w.one(wrow[j] + whole + l);
      load16(wv[j], t);
    }
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
#pragma GCC unroll 8
      for (int j = 0; j < C; ++j) acc[i][j] += xv[i] * wv[j];
    }
  }
  if constexpr (R * C == kLanes16) {
    Lanes16 totals;
    lane_sums16(acc, totals);
    if (r0 + R <= a.rows && n0 + C <= a.cols) {
      // A whole tile: each row's C totals (+ their biases) stored at once.
      if (a.bias != nullptr) {
        float b[kLanes16];
#pragma GCC unroll 16
        for (int l = 0; l < kLanes16; ++l) b[l] = a.bias[n0 + l % C];
        Lanes16 bv;
        load16(bv, b);
        totals += bv;
      }
      float t[kLanes16];
      std::memcpy(t, &totals, sizeof t);
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) std::memcpy(a.y + (r0 + i) * a.cols + n0, t + C * i, C * sizeof(float));
      return;
    }
    store_tile<R, C>(a, r0, n0, [&](int i, int j) { return totals[C * i + j]; });
  } else {
    float totals[R][C];
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
#pragma GCC unroll 8
      for (int j = 0; j < C; ++j) totals[i][j] = lane_sum(acc[i][j]);
    }
    store_tile<R, C>(a, r0, n0, [&](int i, int j) { return totals[i][j]; });
  }
}

// Column tiles [first, last) of C columns. The columns go in panels whose weights stay in L2
// while every row passes (each weight read from memory once a call), the rows in blocks whose
// inputs stay in L1 while the panel's tiles pass, each tile's weights in L1 while the block's
// rows pass.
template <int R, int C, class Weights>
__attribute__((always_inline)) inline void linear_panels(const LinearOperands& a, const Weights& w,
                                                         int64_t first, int64_t last) {
  constexpr int64_t kBlockBytes = 24 << 10;   // of L1's 32 KiB or more
  constexpr int64_t kPanelBytes = 256 << 10;  // of L2's 512 KiB or more
  const int64_t row_bytes = a.in * static_cast<int64_t>(sizeof(float));
  const int64_t block_rows = kBlockBytes / row_bytes / R * R > R ? kBlockBytes / row_bytes / R * R : R;
  const int64_t panel_tiles = kPanelBytes / (C * row_bytes) > 1 ? kPanelBytes / (C * row_bytes) : 1;
  for (int64_t panel = first; panel < last; panel += panel_tiles) {
    const int64_t panel_end = panel + panel_tiles < last ? panel + panel_tiles : last;
    for (int64_t block = 0; block < a.rows; block += block_rows) {
      const int64_t end = block + block_rows < a.rows ? block + block_rows : a.rows;
      for (int64_t t = panel; t < panel_end; ++t) {
        // The first row tile fetches the next column tile's weights while it computes: from
        // memory in the first block (a decode step's head reads each weight once, and a miss
        // costs more than the tile's arithmetic), from L2 after; the other row tiles find this
        // tile's in L1.
        linear_tile<R, C, true>(a, w, block, t * C);
        for (int64_t r = block + R; r < end; r += R) linear_tile<R, C, false>(a, w, r, t * C);
      }
    }
  }
}

// The tile shapes fit each ISA's registers: 16 zmm accumulators under AVX-512, 6 pairs of ymm
// under AVX2 and the baseline. kLinearColumns is their common column count, which the tasks cut
// the columns by.
constexpr int64_t kLinearColumns = 4;

template <class Weights>
__attribute__((target("avx512f,fma"))) void linear_panels_avx512(const LinearOperands& a, const Weights& w,
                                                              int64_t first, int64_t last) {
  linear_panels<4, kLinearColumns>(a, w, first, last);
}

template <class Weights>
__attribute__((target("avx2,fma"))) void linear_panels_avx2(const LinearOperands& a, const Weights& w,
                                                         int64_t first, int64_t last) {
  linear_panels<1, kLinearColumns>(a, w, first, last);
}

template <class Weights>
void linear_panels_baseline(const LinearOperands& a, const Weights& w, int64_t first, int64_t last) {
  linear_panels<1, kLinearColumns>(a, w, first, last);
}

template <class Weights>
void linear_columns(const LinearOperands& a, const Weights& w, int64_t first, int64_t last) {
  static const int isa = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma") ? 2
                         : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")  ? 1
                                                                                             : 0;
  if (isa == 2) return linear_panels_avx512(a, w, first, last);
  if (isa == 1) return linear_panels_avx2(a, w, first, last);
  linear_panels_baseline(a, w, first, last);
}

}  // namespace
}  // namespace ampt::kernels

#pragma GCC pop_options

namespace ampt::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// About this many multiply-adds per task: below it one thread does the whole call (waking the
// others costs more). Only the speed depends on it, never a bit of the result.
constexpr int64_t kWorkPerTask = int64_t{1} << 15;

thread_local bool invariant_on = false;

void require_cpu(const char* kernel, const char* name, const torch::Tensor& t) {
  if (!t.defined() || t.is_cpu()) return;
  throw UsageError(fmt::format(
      "exact mode: the batch-invariant {} got {} on {}, but its kernels run on the CPU only so "
      "far (a CUDA version is not written yet)",
      kernel, name, t.device().str()));
}

void require_float_dtype(const char* kernel, const char* name, const torch::Tensor& t,
                         c10::ScalarType dtype) {
  const auto got = t.scalar_type();
  TORCH_CHECK(got == torch::kFloat32 || got == torch::kBFloat16 || got == torch::kFloat16,
              "batch-invariant ", kernel, ": ", name, " is ", got,
              "; float32, bfloat16 or float16 are allowed");
  TORCH_CHECK(got == dtype, "batch-invariant ", kernel, ": ", name, " is ", got, " where the first input is ",
              dtype, "; all inputs must share one dtype");
}

torch::Tensor linear_values(const torch::Tensor& x, const torch::Tensor& weight,
                            const torch::Tensor& bias, c10::ScalarType dtype) {
  const int64_t in = weight.size(1);
  const int64_t cols = weight.size(0);
  const int64_t rows = c10::multiply_integers(x.sizes().begin(), x.sizes().end() - 1);
  // x and the bias rounded to the compute dtype, then widened; the weight read as it is stored
  // where the kernel can (float32, bfloat16, float32 to be rounded to bfloat16), else rounded and
  // widened here.
  const auto widened = [dtype](const torch::Tensor& t) {
    return t.to(dtype).to(torch::kFloat32).contiguous();
  };
  const auto xs = widened(x.reshape({rows, in}));
  const auto b = bias.defined() ? widened(bias) : torch::Tensor();
  // Allocated in the output's shape, not viewed into it: a view made inside an autograd
  // Function could not be modified in place later.
  auto sizes = x.sizes().vec();
  sizes.back() = cols;
  auto y = torch::empty(sizes, x.options().dtype(torch::kFloat32));
  if (rows == 0 || cols == 0) return y.to(dtype);
  const LinearOperands operands{xs.const_data_ptr<float>(), b.defined() ? b.const_data_ptr<float>() : nullptr,
                                y.mutable_data_ptr<float>(), rows, in, cols};
  torch::Tensor stored = weight.contiguous();
  if (!(dtype == torch::kFloat32 || dtype == torch::kBFloat16) ||
      !(stored.scalar_type() == torch::kFloat32 || stored.scalar_type() == torch::kBFloat16)) {
    stored = widened(stored);
  }
  const int64_t tiles = (cols + kLinearColumns - 1) / kLinearColumns;
  const int64_t grain = std::max<int64_t>(1, kWorkPerTask / (kLinearColumns * std::max<int64_t>(in, 1) * rows));
  const auto run = [&](const auto& weights) {
    at::parallel_for(0, tiles, grain, [&](int64_t begin, int64_t end) { linear_columns(operands, weights, begin, end); });
  };
  if (stored.scalar_type() == torch::kBFloat16) {
    run(Bf16Weights{reinterpret_cast<const uint16_t*>(stored.const_data_ptr<at::BFloat16>())});
  } else if (dtype == torch::kBFloat16) {
    run(Fp32AsBf16Weights{stored.const_data_ptr<float>()});
  } else {
    run(Fp32Weights{stored.const_data_ptr<float>()});
  }
  return y.to(dtype);
}

class InvariantLinearFunction : public torch::autograd::Function<InvariantLinearFunction> {
 public:
  // x and bias in the compute dtype; weight in it, or float32 to be rounded to it (bfloat16).
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight,
                               const std::optional<torch::Tensor>& bias) {
    ctx->save_for_backward({x, weight});
    ctx->saved_data["bias"] = bias.has_value();
    return linear_values(x, weight, bias.value_or(torch::Tensor()), x.scalar_type());
  }

  // As at::linear's backward forms them under autocast (fused_linear's linear_param_grads, no
  // epilogues; a float32 weight's gradient the compute dtype's, cast as autocast's cast passes it).
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    const auto& weight = saved[1];
    const auto dy = grads[0].to(x.scalar_type()).reshape({-1, weight.size(0)}).contiguous();
    auto params = linear_param_grads(
        dy, [&] { return x.reshape({-1, weight.size(1)}); }, ctx->needs_input_grad(1),
        // (Without a bias autograd counts no third input to ask about.)
        ctx->saved_data["bias"].toBool() && ctx->needs_input_grad(2), /*epilogues=*/false);
    if (params.weight.defined()) params.weight = params.weight.to(weight.scalar_type());
    torch::Tensor dx;
    if (ctx->needs_input_grad(0)) dx = dy.mm(weight.to(x.scalar_type())).reshape(x.sizes());
    return {dx, params.weight, params.bias};
  }
};

torch::Tensor attention_values(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& start, double scale,
                               int64_t window) {
  const int64_t batch = q.size(0), heads = q.size(1), queries = q.size(2), dim = q.size(3);
  const int64_t kv_heads = k.size(1), keys = k.size(2), value_dim = v.size(3);
  const auto fp32 = q.options().dtype(torch::kFloat32);
  const auto qs = q.to(torch::kFloat32).contiguous();
  // 16 columns of padding: a query's last 16-key step may start at its last key.
  const int64_t padded_keys = keys + kLanes16;
  auto kt = torch::zeros({batch, kv_heads, dim, padded_keys}, fp32);
  kt.narrow(3, 0, keys).copy_(k.transpose(2, 3));
  const auto vs = v.to(torch::kFloat32).contiguous();
  auto out = torch::empty({batch, heads, queries, value_dim}, fp32);
  const int64_t items = batch * heads * queries;
  if (items > 0) {
    const AttentionOperands operands{qs.const_data_ptr<float>(),
                                     kt.const_data_ptr<float>(),
                                     vs.const_data_ptr<float>(),
                                     start.const_data_ptr<int64_t>(),
                                     out.mutable_data_ptr<float>(),
                                     heads,
                                     kv_heads,
                                     queries,
                                     keys,
                                     padded_keys,
                                     dim,
                                     value_dim,
                                     window,
                                     static_cast<float>(scale)};
    const int64_t grain = std::max<int64_t>(1, kWorkPerTask / std::max<int64_t>(1, keys * (dim + value_dim)));
    at::parallel_for(0, items, grain, [&](int64_t begin, int64_t end) {
      std::vector<float> scores(static_cast<size_t>(padded_keys));
      for (int64_t item = begin; item < end; ++item) attention_query(operands, item, scores.data());
    });
  }
  return out.to(q.scalar_type());
}

// The same attention from ATen's operations, which autograd differentiates: a padding query
// attends everywhere, so that its softmax stays finite, and its output is then zeroed.
torch::Tensor math_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const torch::Tensor& start, double scale, int64_t window) {
  const int64_t queries = q.size(2), keys = k.size(2), group = q.size(1) / k.size(1);
  const auto key = torch::arange(keys, start.options()).view({1, 1, 1, keys});
  const auto position = torch::arange(keys - queries, keys, start.options()).view({1, 1, queries, 1});
  const auto first = start.view({-1, 1, 1, 1});
  const auto valid = position.ge(first);
  auto seen = key.le(position).logical_and(key.ge(first));
  if (window > 0) seen = seen.logical_and(key.gt(position - window));
  const auto allowed = seen.logical_or(valid.logical_not());
  const auto scores = q.matmul(k.repeat_interleave(group, 1).transpose(2, 3)).mul(scale);
  const auto weights =
      scores.masked_fill(allowed.logical_not(), -std::numeric_limits<double>::infinity()).softmax(-1);
  return weights.matmul(v.repeat_interleave(group, 1)).mul(valid);
}

class InvariantAttentionFunction : public torch::autograd::Function<InvariantAttentionFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& start, double scale,
                               int64_t window) {
    ctx->save_for_backward({q, k, v, start});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["window"] = window;
    return attention_values(q, k, v, start, scale, window);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& start = saved[3];
    // In float32 whatever autocast says where the backward runs.
    const c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    const torch::AutoGradMode grad_mode(true);
    std::vector<torch::Tensor> inputs;
    for (size_t i = 0; i < 3; ++i) {
      inputs.push_back(saved[i].detach().to(torch::kFloat32).requires_grad_(true));
    }
    const auto y = math_attention(inputs[0], inputs[1], inputs[2], start,
                                  ctx->saved_data["scale"].toDouble(),
                                  ctx->saved_data["window"].toInt());
    const auto g = torch::autograd::grad({y}, inputs, {grads[0].to(torch::kFloat32)});
    return {g[0].to(saved[0].scalar_type()), g[1].to(saved[1].scalar_type()),
            g[2].to(saved[2].scalar_type()), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};


torch::Tensor activation_values(const torch::Tensor& x, Activation f) {
  const auto xs = x.to(torch::kFloat32).contiguous();
  auto y = torch::empty_like(xs);
  const float* in = xs.const_data_ptr<float>();
  float* out = y.mutable_data_ptr<float>();
  at::parallel_for(0, xs.numel(), kWorkPerTask,
                   [&](int64_t begin, int64_t end) { activation_range(f, in, out, begin, end); });
  return y.to(x.scalar_type());
}

class InvariantActivationFunction : public torch::autograd::Function<InvariantActivationFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t f) {
    ctx->save_for_backward({x});
    ctx->saved_data["f"] = f;
    return activation_values(x, static_cast<Activation>(f));
  }

  // ATen's derivatives of the functions the fixed arithmetic approximates to a few ulps.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto x = ctx->get_saved_variables()[0];
    const auto f = static_cast<Activation>(ctx->saved_data["f"].toInt());
    const auto g = grads[0].to(x.scalar_type());
    const auto dx = f == Activation::silu ? at::silu_backward(g, x)
                                          : at::gelu_backward(g, x, f == Activation::gelu_tanh ? "tanh" : "none");
    return {dx, torch::Tensor()};
  }
};

torch::Tensor invariant_activation(const char* name, const torch::Tensor& x, Activation f) {
  require_cpu(name, "x", x);
  require_float_dtype(name, "x", x, x.scalar_type());
  return InvariantActivationFunction::apply(x, static_cast<int64_t>(f));
}
}  // namespace

bool batch_invariant() { return invariant_on; }

BatchInvariantScope::BatchInvariantScope(bool on) : previous_(invariant_on) { invariant_on = on; }

BatchInvariantScope::~BatchInvariantScope() { invariant_on = previous_; }

torch::Tensor invariant_linear(const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias) {
  require_cpu("linear", "x", x);
  require_cpu("linear", "weight", weight);
  require_cpu("linear", "bias", bias);
  // As autocast casts a Linear's arguments (at::linear is in its lower-precision list).
  const auto cx = autocast_linear_arg(x);
  // A float32 weight under bfloat16 autocast is rounded inside the kernel, as the cast would
  // round it: no bfloat16 copy of the whole weight per call.
  const bool rounded_inside = cx.scalar_type() == torch::kBFloat16 && weight.scalar_type() == torch::kFloat32 &&
                              autocast_dtype(weight.device().type()) == torch::kBFloat16;
  const auto cw = rounded_inside ? weight : autocast_linear_arg(weight);
  const auto cb = bias.defined() ? autocast_linear_arg(bias) : bias;
  require_float_dtype("linear", "x", cx, cx.scalar_type());
  if (!rounded_inside) require_float_dtype("linear", "weight", cw, cx.scalar_type());
  if (cb.defined()) require_float_dtype("linear", "bias", cb, cx.scalar_type());
  TORCH_CHECK(cx.dim() >= 1 && cw.dim() == 2 && cx.size(-1) == cw.size(1),
              "batch-invariant linear: x ", cx.sizes(), " and weight ", cw.sizes(),
              " do not match; x [..., in] and weight [out, in] are allowed");
  TORCH_CHECK(!cb.defined() || (cb.dim() == 1 && cb.size(0) == cw.size(0)),
              "batch-invariant linear: bias ", cb.sizes(), " for weight ", cw.sizes(),
              "; bias [out] is allowed");
  return InvariantLinearFunction::apply(cx, cw, optional_tensor(cb));
}

torch::Tensor invariant_causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                                         const torch::Tensor& v, const torch::Tensor& key_start,
                                         std::optional<double> scale, int64_t window) {
  require_cpu("attention", "q", q);
  require_cpu("attention", "k", k);
  require_cpu("attention", "v", v);
  require_cpu("attention", "key_start", key_start);
  // As autocast casts scaled_dot_product_attention's (in its lower-precision list, as a Linear).
  const auto cq = autocast_linear_arg(q);
  const auto ck = autocast_linear_arg(k);
  const auto cv = autocast_linear_arg(v);
  require_float_dtype("attention", "q", cq, cq.scalar_type());
  require_float_dtype("attention", "k", ck, cq.scalar_type());
  require_float_dtype("attention", "v", cv, cq.scalar_type());
  TORCH_CHECK(cq.dim() == 4 && ck.dim() == 4 && cv.dim() == 4 && ck.size(0) == cq.size(0) &&
                  cv.size(0) == cq.size(0) && ck.size(1) > 0 && cq.size(1) % ck.size(1) == 0 &&
                  cv.size(1) == ck.size(1) && ck.size(3) == cq.size(3) && cv.size(2) == ck.size(2) &&
                  cq.size(2) <= ck.size(2),
              "batch-invariant attention: q ", cq.sizes(), ", k ", ck.sizes(), " and v ", cv.sizes(),
              " do not fit; q [B, H, Tq, D], k [B, Hkv, Tk, D], v [B, Hkv, Tk, Dv] with H a multiple "
              "of Hkv and Tq ≤ Tk are allowed");
  const int64_t batch = cq.size(0), keys = ck.size(2);
  auto start = key_start.defined() ? key_start : torch::zeros({batch}, torch::kInt64);
  TORCH_CHECK(start.scalar_type() == torch::kInt64 && start.dim() == 1 && start.size(0) == batch,
              "batch-invariant attention: key_start is ", start.scalar_type(), " ", start.sizes(),
              "; int64 [", batch, "] (one start a row) is allowed");
  start = start.contiguous();
  const auto* first = start.const_data_ptr<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    TORCH_CHECK(first[b] >= 0 && first[b] <= keys, "batch-invariant attention: key_start[", b,
                "] is ", first[b], "; 0 to the ", keys, " keys are allowed");
  }
  TORCH_CHECK(window >= 0, "batch-invariant attention: window ", window,
              "; 0 (every key) or a positive number of positions is allowed");
  const double s = scale.value_or(1.0 / std::sqrt(static_cast<double>(cq.size(3))));
  return InvariantAttentionFunction::apply(cq, ck, cv, start, s, window);
}

}  // namespace ampt::kernels

namespace ampt::kernels {

torch::Tensor invariant_silu(const torch::Tensor& x) {
  return invariant_activation("silu", x, Activation::silu);
}

torch::Tensor invariant_gelu(const torch::Tensor& x, std::string_view approximate) {
  TORCH_CHECK(approximate == "tanh" || approximate == "none", "batch-invariant gelu: approximate '",
              approximate, "'; 'tanh' or 'none' are allowed");
  return invariant_activation("gelu", x, approximate == "tanh" ? Activation::gelu_tanh : Activation::gelu_erf);
}

torch::Tensor invariant_logsumexp(const torch::Tensor& x) {
  require_cpu("logsumexp", "x", x);
  TORCH_CHECK(x.dim() == 2 && x.size(1) > 0, "batch-invariant logsumexp: x ", x.sizes(),
              "; [rows, n] with n ≥ 1 is allowed");
  const auto xs = x.detach().to(torch::kFloat32).contiguous();
  const int64_t rows = xs.size(0), n = xs.size(1);
  auto out = torch::empty({rows}, xs.options());
  const float* in = xs.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  at::parallel_for(0, rows, std::max<int64_t>(1, kWorkPerTask / n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) o[r] = logsumexp_fixed(in + r * n, n);
  });
  return out;
}

std::pair<torch::Tensor, torch::Tensor> invariant_cos_sin(const torch::Tensor& angles) {
  require_cpu("cos/sin", "angles", angles);
  TORCH_CHECK(angles.scalar_type() == torch::kFloat32, "batch-invariant cos/sin: angles are ",
              angles.scalar_type(), "; float32 is allowed");
  const auto a = angles.contiguous();
  auto cos = torch::empty_like(a), sin = torch::empty_like(a);
  const float* in = a.const_data_ptr<float>();
  float* c = cos.mutable_data_ptr<float>();
  float* s = sin.mutable_data_ptr<float>();
  at::parallel_for(0, a.numel(), kWorkPerTask, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      c[i] = std::cos(in[i]);
      s[i] = std::sin(in[i]);
    }
  });
  return {cos, sin};
}

}  // namespace ampt::kernels
