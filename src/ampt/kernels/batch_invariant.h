// Exact mode's kernels (issue #66): a Linear and a causal attention whose every output element is
// reduced in one fixed order, so that a row's result is the same bits whatever else the call
// holds (other rows, other lengths, padding), however many threads run it, and, for the
// attention, whether its query comes in a prefill, a training forward or a decode step against
// a KV cache (Thinking Machines 2025, "Defeating nondeterminism in LLM inference"). ATen's GEMMs
// choose their blocking by the matrix shape and its attention's reduction over keys by the query
// and key lengths, so neither promises that.
//
// The arithmetic is written down so that a CUDA kernel can be checked against it bit for bit:
// inputs widened to float32 (exactly, from bfloat16 and float16), each product rounded to float32
// and then added (no fused multiply-add, in any clone of the CPU code; the Linear excepted, below), each sum taken in an order
// fixed by the indices alone, the result rounded once to the inputs' dtype. A half input's products are exact in
// float32 (8 × 8 and 11 × 11 significant bits), so there a fused multiply-add would give the same
// bits. The CPU code is that reference; on other devices the kernels refuse the tensors.
//
// Forward passes only are invariant: the backward is ATen's (gradients right, not invariant).
#pragma once

#include <torch/types.h>

#include <optional>
#include <string_view>
#include <utility>

namespace ampt::kernels {

// Whether exact mode is on for this thread: the models' Linear seam, attention, and the sampler
// consult it. Off unless a BatchInvariantScope says otherwise.
bool batch_invariant();

// Turns exact mode on (or off) on this thread while it lives, restoring what was before.
class BatchInvariantScope {
 public:
  explicit BatchInvariantScope(bool on = true);
  ~BatchInvariantScope();
  BatchInvariantScope(const BatchInvariantScope&) = delete;
  BatchInvariantScope& operator=(const BatchInvariantScope&) = delete;

 private:
  bool previous_;
};

// x [..., in] (2-D [rows, in] or the models' 3-D [B, T, in]), weight [out, in], bias [out] or
// undefined → [..., out], x·weightᵀ + bias: element (r, n) is Σ_k x[r, k]·weight[n, k] in 16
// float32 lanes, lane l summing the k ≡ l (mod 16) in ascending order from 0.0f, each
// step one fused multiply-add on a CPU with FMA (a product rounded, then added, without) (the last group of
// fewer than 16 k padded with 0·0), the lanes then
// added pairwise (l + l+8, then l + l+4, l + l+2, l + l+1, as a warp's shuffle-down), then + bias[n], rounded once to the dtype. float32, bfloat16 or float16,
// all three tensors of one dtype; under autocast they are cast as autocast casts a Linear's (a
// float32 weight under bfloat16 autocast rounded to nearest even inside the kernel, not copied).
// The weight is read as stored, row by row: nothing of it is transposed or copied per call.
// Gradients to all three, as at::linear's backward forms them.
torch::Tensor invariant_linear(const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias);

// Causal attention softmax(q·kᵀ·scale)·v over each row's own keys: q [B, H, Tq, D], k [B, Hkv,
// Tk, D], v [B, Hkv, Tk, Dv], H a multiple of Hkv (query head h reads key/value head
// h / (H / Hkv)), Tq ≤ Tk. Query i sits at key position p = Tk − Tq + i (Tq = Tk: a prefill or a
// training forward; Tq = 1: a decode step against a cache of Tk keys, its own key last) and
// attends to keys [key_start[b], p] of its row: key_start [B] int64 on the CPU holds where each
// row's sequence begins (left padding; undefined: all rows begin at 0). A query before its row's
// start (a padding position) gets zeros. scale: 1/√D unless given. Scores Σ_d q[d]·k[d] with d
// ascending, times scale; their max; the exponentials (a fixed polynomial of multiplications
// and additions, the same on every device, not the C library's expf) summed with keys
// ascending; Σ_j e_j·v[j] with keys ascending, divided by that sum, rounded once to the dtype.
// window > 0 (sliding-window attention) keeps a query's keys to its own and the window - 1
// before it. Gradients to q, k and v from ATen's math attention under the same mask, in float32.
torch::Tensor invariant_causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                                         const torch::Tensor& v,
                                         const torch::Tensor& key_start = {},
                                         std::optional<double> scale = std::nullopt,
                                         int64_t window = 0);

// The activations elementwise from the same fixed exponential (float32 in, rounded once to x's
// dtype): SiLU x·σ(x), and GELU with approximate "tanh" (GPT-2's) or "none" (erf by Abramowitz
// and Stegun 7.1.26, within 1.5e-7 of erf). ATen's loops compute the last elements of a call
// with the C library's functions and the others with SLEEF's vectors, so an element's bits there
// depend on where the call's tensor ends. Gradients from ATen's silu_backward and gelu_backward.
torch::Tensor invariant_silu(const torch::Tensor& x);
torch::Tensor invariant_gelu(const torch::Tensor& x, std::string_view approximate);

// x [rows, n] (any float dtype; no gradient) → [rows] float32 log Σ_j e^(x_j): each row alone
// (its max; e^(x_j − max) in 16 lanes by j mod 16, each ascending, the lanes added in order; the
// log by the C library): what a sampled token's log-probability and the training forward's
// both subtract.
torch::Tensor invariant_logsumexp(const torch::Tensor& x);

// cos and sin of float32 `angles` (no gradient), element by element with the C library's cosf
// and sinf: the rotary angles of a position are the same bits in every forward.
std::pair<torch::Tensor, torch::Tensor> invariant_cos_sin(const torch::Tensor& angles);

}  // namespace ampt::kernels
