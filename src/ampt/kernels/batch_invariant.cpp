#include "ampt/kernels/batch_invariant.h"

#include "ampt/core/errors.h"
#include "ampt/kernels/fused_linear.h"

#include <ATen/Parallel.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/accumulate.h>
#include <fmt/format.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

// The kernels' arithmetic is their contract (batch_invariant.h): GCC contracts a·b + c into a
// fused multiply-add by default in C++ wherever the target has one (the AVX-512 clone, not the
// AVX2 or plain x86-64 ones), which would make the bits depend on the CPU. Only the raw-pointer
// code between push and pop, which calls nothing but memcpy and itself, so that no inline
// function of another setting has to be inlined into it.
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")

namespace ampt::kernels {
namespace {

// 16 floats, GCC's vector type: one zmm register in the AVX-512 clone, two ymm or four xmm in the
// others. Lanes are independent: each computes its element as a scalar loop would.
using Lanes16 = float __attribute__((vector_size(64)));
constexpr int64_t kLanes16 = 16;

// Through memory, not by value: passing a 64-byte vector would change with the ISA.
inline void load16(Lanes16& v, const float* p) { std::memcpy(&v, p, sizeof v); }

// A tile of the Linear: 4 rows by 32 columns, eight accumulators.
constexpr int64_t kTileRows = 4;
constexpr int64_t kTileCols = 2 * kLanes16;

struct LinearOperands {
  const float* x;     // [rows, in]
  const float* wt;    // [in, padded_cols]: the weight transposed, zero past cols
  const float* bias;  // [padded_cols], or null
  float* y;           // [rows, cols]
  int64_t rows, in, cols, padded_cols;
};

inline int64_t last_row_at_most(int64_t row, int64_t rows) { return row < rows ? row : rows - 1; }

inline void store_tile_row(float* y, const Lanes16& low, const Lanes16& high, int64_t width) {
  float row[kTileCols];
  std::memcpy(row, &low, sizeof low);
  std::memcpy(row + kLanes16, &high, sizeof high);
  std::memcpy(y, row, static_cast<size_t>(width) * sizeof(float));
}

// Output rows row0..row0+3, columns col0..col0+31. Rows past the last read the last (their
// results are dropped), so a row's arithmetic is the same in a full tile and a partial one.
__attribute__((target_clones("avx512f", "avx2", "default"))) void linear_tile(
    const LinearOperands& a, int64_t row0, int64_t col0) {
  const float* x0 = a.x + last_row_at_most(row0, a.rows) * a.in;
  const float* x1 = a.x + last_row_at_most(row0 + 1, a.rows) * a.in;
  const float* x2 = a.x + last_row_at_most(row0 + 2, a.rows) * a.in;
  const float* x3 = a.x + last_row_at_most(row0 + 3, a.rows) * a.in;
  Lanes16 c00{}, c01{}, c10{}, c11{}, c20{}, c21{}, c30{}, c31{};
  const float* w = a.wt + col0;
  for (int64_t k = 0; k < a.in; ++k, w += a.padded_cols) {
    Lanes16 w0, w1;
    load16(w0, w);
    load16(w1, w + kLanes16);
    c00 += x0[k] * w0;
    c01 += x0[k] * w1;
    c10 += x1[k] * w0;
    c11 += x1[k] * w1;
    c20 += x2[k] * w0;
    c21 += x2[k] * w1;
    c30 += x3[k] * w0;
    c31 += x3[k] * w1;
  }
  if (a.bias != nullptr) {
    Lanes16 b0, b1;
    load16(b0, a.bias + col0);
    load16(b1, a.bias + col0 + kLanes16);
    c00 += b0;
    c01 += b1;
    c10 += b0;
    c11 += b1;
    c20 += b0;
    c21 += b1;
    c30 += b0;
    c31 += b1;
  }
  const int64_t width = a.cols - col0 < kTileCols ? a.cols - col0 : kTileCols;
  float* y = a.y + row0 * a.cols + col0;
  store_tile_row(y, c00, c01, width);
  if (row0 + 1 < a.rows) store_tile_row(y + a.cols, c10, c11, width);
  if (row0 + 2 < a.rows) store_tile_row(y + 2 * a.cols, c20, c21, width);
  if (row0 + 3 < a.rows) store_tile_row(y + 3 * a.cols, c30, c31, width);
}

// e^x for x ≤ 0 from multiplications and additions alone (Cephes' expf: x = n·ln2 + r with
// |r| ≤ ln2/2, a degree-7 polynomial in r, times 2^n), so that a GPU kernel can compute the
// same bits, which it could not from glibc's expf or CUDA's. Below −87, where 2^n would leave
// float32's normal range, 0 (e^−87 ≈ 1.6e-38: nothing a sum of exponentials that holds e^0 = 1
// can notice).
inline float exp_fixed(float x) {
  if (!(x >= -87.0F)) return x != x ? x : 0.0F;
  constexpr float kLog2e = 1.44269504088896341F;
  constexpr float kRound = 12582912.0F;  // 1.5·2^23: adding it rounds to an integer
  const float n = (x * kLog2e + kRound) - kRound;
  // ln 2 in two parts, the first with few enough bits that n times it is exact.
  const float r = (x - n * 0.693359375F) - n * -2.12194440e-4F;
  float p = 1.9875691500e-4F;
  p = p * r + 1.3981999507e-3F;
  p = p * r + 8.3334519073e-3F;
  p = p * r + 4.1665795894e-2F;
  p = p * r + 1.6666665459e-1F;
  p = p * r + 5.0000001201e-1F;
  p = (p * (r * r) + r) + 1.0F;
  const auto bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return p * two_n;
}

struct AttentionOperands {
  const float* q;       // [B, H, Tq, D]
  const float* kt;      // [B, Hkv, D, padded_keys]: the keys transposed, zero past Tk
  const float* v;       // [B, Hkv, Tk, Dv]
  const int64_t* start;  // [B]
  float* out;           // [B, H, Tq, Dv]
  int64_t heads, kv_heads, queries, keys, padded_keys, dim, value_dim;
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
  const int64_t first = a.start[b];
  const int64_t last = a.keys - a.queries + i;
  if (last < first) {
    std::memset(o, 0, static_cast<size_t>(a.value_dim) * sizeof(float));
    return;
  }
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
                            const torch::Tensor& bias) {
  const int64_t in = weight.size(1);
  const int64_t cols = weight.size(0);
  const int64_t rows = c10::multiply_integers(x.sizes().begin(), x.sizes().end() - 1);
  const auto xs = x.reshape({rows, in}).to(torch::kFloat32).contiguous();
  const int64_t padded = (cols + kTileCols - 1) / kTileCols * kTileCols;
  const auto fp32 = x.options().dtype(torch::kFloat32);
  auto wt = torch::zeros({in, padded}, fp32);
  wt.narrow(1, 0, cols).copy_(weight.t());
  torch::Tensor b;
  if (bias.defined()) {
    b = torch::zeros({padded}, fp32);
    b.narrow(0, 0, cols).copy_(bias);
  }
  auto y = torch::empty({rows, cols}, fp32);
  if (rows > 0 && cols > 0) {
    const LinearOperands operands{xs.const_data_ptr<float>(),
                                  wt.const_data_ptr<float>(),
                                  b.defined() ? b.const_data_ptr<float>() : nullptr,
                                  y.mutable_data_ptr<float>(),
                                  rows,
                                  in,
                                  cols,
                                  padded};
    const int64_t row_tiles = (rows + kTileRows - 1) / kTileRows;
    const int64_t tiles = row_tiles * (padded / kTileCols);
    const int64_t grain = std::max<int64_t>(1, kWorkPerTask / (kTileRows * kTileCols * std::max<int64_t>(in, 1)));
    // Column panels outer, so that a task's tiles share their panel of the weight.
    at::parallel_for(0, tiles, grain, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        linear_tile(operands, (t % row_tiles) * kTileRows, (t / row_tiles) * kTileCols);
      }
    });
  }
  auto sizes = x.sizes().vec();
  sizes.back() = cols;
  return y.to(x.scalar_type()).view(sizes);
}

class InvariantLinearFunction : public torch::autograd::Function<InvariantLinearFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight,
                               const std::optional<torch::Tensor>& bias) {
    ctx->save_for_backward({x, weight});
    ctx->saved_data["bias"] = bias.has_value();
    return linear_values(x, weight, bias.value_or(torch::Tensor()));
  }

  // As at::linear's backward forms them (fused_linear's linear_param_grads, no epilogues).
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    const auto& weight = saved[1];
    const auto dy = grads[0].reshape({-1, weight.size(0)}).contiguous();
    const auto params = linear_param_grads(
        dy, [&] { return x.reshape({-1, weight.size(1)}); }, ctx->needs_input_grad(1),
        // (Without a bias autograd counts no third input to ask about.)
        ctx->saved_data["bias"].toBool() && ctx->needs_input_grad(2), /*epilogues=*/false);
    torch::Tensor dx;
    if (ctx->needs_input_grad(0)) dx = dy.mm(weight).reshape(x.sizes());
    return {dx, params.weight, params.bias};
  }
};

torch::Tensor attention_values(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& start, double scale) {
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
                             const torch::Tensor& start, double scale) {
  const int64_t queries = q.size(2), keys = k.size(2), group = q.size(1) / k.size(1);
  const auto key = torch::arange(keys, start.options()).view({1, 1, 1, keys});
  const auto position = torch::arange(keys - queries, keys, start.options()).view({1, 1, queries, 1});
  const auto first = start.view({-1, 1, 1, 1});
  const auto valid = position.ge(first);
  const auto allowed = key.le(position).logical_and(key.ge(first)).logical_or(valid.logical_not());
  const auto scores = q.matmul(k.repeat_interleave(group, 1).transpose(2, 3)).mul(scale);
  const auto weights =
      scores.masked_fill(allowed.logical_not(), -std::numeric_limits<double>::infinity()).softmax(-1);
  return weights.matmul(v.repeat_interleave(group, 1)).mul(valid);
}

class InvariantAttentionFunction : public torch::autograd::Function<InvariantAttentionFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& start, double scale) {
    ctx->save_for_backward({q, k, v, start});
    ctx->saved_data["scale"] = scale;
    return attention_values(q, k, v, start, scale);
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
                                  ctx->saved_data["scale"].toDouble());
    const auto g = torch::autograd::grad({y}, inputs, {grads[0].to(torch::kFloat32)});
    return {g[0].to(saved[0].scalar_type()), g[1].to(saved[1].scalar_type()),
            g[2].to(saved[2].scalar_type()), torch::Tensor(), torch::Tensor()};
  }
};

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
  const auto cw = autocast_linear_arg(weight);
  const auto cb = bias.defined() ? autocast_linear_arg(bias) : bias;
  require_float_dtype("linear", "x", cx, cx.scalar_type());
  require_float_dtype("linear", "weight", cw, cx.scalar_type());
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
                                         std::optional<double> scale) {
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
  const double s = scale.value_or(1.0 / std::sqrt(static_cast<double>(cq.size(3))));
  return InvariantAttentionFunction::apply(cq, ck, cv, start, s);
}

}  // namespace ampt::kernels
