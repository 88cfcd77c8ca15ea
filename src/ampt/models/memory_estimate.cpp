#include "ampt/models/memory_estimate.h"

#include "ampt/models/model_family.h"

#include "ampt/core/errors.h"
#include "ampt/kernels/fused_classifier.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace ampt::models {
namespace {

using Family = ModelDims::Family;

int64_t product(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

// Bytes per element of what a scheme saves for backward: `residual` for the residual stream and
// the norms' inputs (fp32 under O0/O1, where autocast leaves adds and norms in fp32; half under
// O2), `matmul` for what the matmuls and convolutions produce and consume.
struct Widths {
  int64_t residual, matmul;
};
Widths widths(const Scheme& s) {
  if (s.precision == "fp32") return {4, 4};
  return {s.opt_level == "O2" ? 2 : 4, 2};
}

// Cross-entropy's peak at the start of backward, per logit: the fp32 log-probabilities saved by
// log_softmax, the gradient arriving from nll_loss, and the gradient log_softmax produces.
constexpr int64_t kLossBytesPerLogit = 12;

// A GPT block's saved tensors per token and channel (measured with torch's saved-tensor hooks;
// README "ampt recommend"): the block input (ln_1), ln_1's output as the matmul sees it, q/k/v
// (3), the attention output (SDPA keeps it; c_proj reads the same storage), the mid-block
// residual (ln_2), ln_2's output, c_fc's output (4, kept by GELU) and GELU's output (4, kept by
// c_proj) unless the fused MLP recomputes it in backward (kernels/gelu_mlp.h). fp8 Linear layers
// keep their e4m3 inputs (1 byte) instead: ln_1/ln_2 outputs, the attention output as c_proj's
// input (besides SDPA's bf16 copy), and GELU's output; their MLP is never the fused one.
int64_t gpt_block_bytes_per_token_channel(const Scheme& s, bool fused) {
  const auto [r, h] = widths(s);
  if (s.precision == "fp8") return 2 * r + 1 + 3 * h + h + 1 + 1 + 4 * h + 4;
  return 2 * r + h + 3 * h + h + h + 4 * h + (fused ? 0 : 4 * h);
}

// The head and the loss at the start of backward. Plain: ln_f's input and output, then per logit
// the fp32 log-probabilities saved by log_softmax and two gradients of that size. Fused
// (kernels/fused_classifier.h): ln_f's input, the fp32 gradients of the hidden states and of the
// tied weight that the forward computed, and their scaled copies that backward hands on (the
// hidden states' in the matmul dtype, the weight's in fp32); the forward's one chunk of fp32
// logits at a time (about 2^26).
int64_t head_bytes(const ModelDims& d, const Scheme& s, int64_t tokens, int64_t C, int64_t V) {
  const auto [r, h] = widths(s);
  if (!d.fused_kernels) return tokens * C * (r + h) + tokens * V * kLossBytesPerLogit;
  const int64_t chunk_rows = std::min(tokens, kernels::default_chunk_rows(V));
  return tokens * C * (r + 4 + h) + 8 * V * C + chunk_rows * V * 4;
}

int64_t gpt_activations(const ModelDims& d, const Scheme& s, int64_t b, bool checkpointed) {
  const auto [r, h] = widths(s);
  const int64_t T = d.seq_len, C = d.gpt.n_embd, L = d.gpt.n_layer;
  const int64_t tokens = b * T;
  // Per block besides the channel-wide tensors: SDPA's fp32 log-sum-exp per head and token, and
  // the two LayerNorms' fp32 mean and rstd per token.
  const int64_t block = tokens * C * gpt_block_bytes_per_token_channel(s, d.fused_kernels) +
                        tokens * d.gpt.n_head * 4 + tokens * 16;
  // Checkpointing keeps each block's input and recomputes one block at a time in backward.
  const int64_t blocks = checkpointed ? L * tokens * C * r + block : L * block;
  const int64_t data = tokens * 2 * 8;  // int64 inputs and targets
  const int64_t norm_stats = tokens * 8;  // ln_f's mean and rstd
  return data + blocks + norm_stats + head_bytes(d, s, tokens, C, d.gpt.vocab_size);
}

// A Llama block's saved tensors per token (not measured yet; counted from what autograd keeps):
// the RMSNorms' fp32 inputs and their outputs as the matmuls see them, q, k and v before and after
// the rotation, the attention output, SDPA's log-sum-exp per head, and the SwiGLU MLP's gate and
// up outputs, the SiLU and the product that down_proj reads (4 · intermediate).
int64_t llama_activations(const ModelDims& d, const Scheme& s, int64_t b, bool checkpointed) {
  const auto [r, h] = widths(s);
  const auto& m = d.llama;
  const int64_t T = d.seq_len, C = m.n_embd, L = m.n_layer, kv = m.n_kv_head * m.head_dim();
  const int64_t tokens = b * T;
  const int64_t per_token = 2 * (4 * C + 4 + C * h) + 2 * (C + 2 * kv) * h + C * h +
                            m.n_head * 4 + 4 * m.intermediate * h;
  const int64_t block = tokens * per_token;
  const int64_t blocks = checkpointed ? L * tokens * C * r + block : L * block;
  return tokens * 2 * 8 + blocks + tokens * 4 + head_bytes(d, s, tokens, C, m.vocab_size);
}

int64_t mlp_activations(const ModelDims& d, const Scheme& s, int64_t b) {
  const auto [r, h] = widths(s);
  // The input as the first matmul sees it, then per layer the pre-GELU output (kept by GELU)
  // and GELU's output (kept by the next matmul).
  return b * product(d.input_shape) * h + d.mlp_layers * 2 * b * d.mlp_hidden * h +
         b * d.classes * kLossBytesPerLogit + b * 8;
}

// Elements of one sample's feature maps that the CNN keeps for backward: two per conv-BN-ReLU
// (BN's input, ReLU's output) and per basic block four (conv1/BN1 input, ReLU, conv2/BN2
// input, the block's ReLU output) plus one for a projection shortcut's conv output.
int64_t cnn_saved_elements(const ModelDims& d) {
  int64_t height = d.input_shape[1], width = d.input_shape[2];
  const auto strided = [](int64_t length, int64_t stride) { return (length - 1) / stride + 1; };
  int64_t elements = 2 * d.cnn_channels * height * width;
  int64_t in = d.cnn_channels;
  for (int64_t stage = 0; stage < 3; ++stage) {
    const int64_t out = d.cnn_channels << stage;
    for (int64_t i = 0; i < d.cnn_blocks; ++i) {
      const int64_t stride = stage > 0 && i == 0 ? 2 : 1;
      height = strided(height, stride);
      width = strided(width, stride);
      const bool projection = stride != 1 || (i == 0 ? in : out) != out;
      elements += (projection ? 5 : 4) * out * height * width;
    }
    in = out;
  }
  return elements;
}

int64_t cnn_activations(const ModelDims& d, const Scheme& s, int64_t b) {
  const auto [r, h] = widths(s);
  return b * product(d.input_shape) * h + b * cnn_saved_elements(d) * h +
         b * d.classes * kLossBytesPerLogit + b * 8;
}

}  // namespace

ModelDims model_dims(const config::Config& config, std::vector<int64_t> input_shape,
                     int64_t seq_len) {
  return family_of(config).memory_dims(config, std::move(input_shape), seq_len);
}

ParameterCounts count_parameters(const ModelDims& d) {
  ParameterCounts p;
  switch (d.family) {
    case Family::gpt: {
      const int64_t L = d.gpt.n_layer, C = d.gpt.n_embd;
      p.fp8_linear_weights = L * 12 * C * C;
      p.matmul_weights = p.fp8_linear_weights + d.gpt.vocab_size * C;  // the tied head
      p.norm = (2 * L + 1) * 2 * C;
      // Linear biases 3C + C + 4C + C per block, the embeddings (wte once: it is the head).
      p.total = p.matmul_weights + p.norm + L * 9 * C + d.gpt.block_size * C;
      break;
    }
    case Family::llama: {
      const auto& m = d.llama;
      const int64_t L = m.n_layer, C = m.n_embd, kv = m.n_kv_head * m.head_dim();
      p.fp8_linear_weights = L * (2 * C * C + 2 * C * kv + 3 * C * m.intermediate);
      p.matmul_weights = p.fp8_linear_weights + m.vocab_size * C;  // the head
      p.norm = (2 * L + 1) * C;
      p.total = m.parameters();
      break;
    }
    case Family::mlp: {
      int64_t width = product(d.input_shape);
      for (int64_t i = 0; i < d.mlp_layers; ++i) {
        p.matmul_weights += width * d.mlp_hidden;
        p.total += width * d.mlp_hidden + d.mlp_hidden;
        width = d.mlp_hidden;
      }
      p.matmul_weights += width * d.classes;
      p.total += width * d.classes + d.classes;
      break;
    }
    case Family::cnn: {
      const int64_t c = d.cnn_channels;
      p.matmul_weights = 9 * d.input_shape[0] * c;
      p.norm = 2 * c;
      int64_t in = c;
      for (int64_t stage = 0; stage < 3; ++stage) {
        const int64_t out = c << stage;
        for (int64_t i = 0; i < d.cnn_blocks; ++i) {
          const int64_t block_in = i == 0 ? in : out;
          const bool projection = (stage > 0 && i == 0) || block_in != out;
          p.matmul_weights += 9 * block_in * out + 9 * out * out + (projection ? block_in * out : 0);
          p.norm += (projection ? 3 : 2) * 2 * out;
        }
        in = out;
      }
      p.matmul_weights += in * d.classes;
      p.total = p.matmul_weights + p.norm + d.classes;
      break;
    }
  }
  return p;
}

const std::vector<Scheme>& memory_schemes() {
  static const std::vector<Scheme> schemes = {
      {"fp32", "O0"}, {"bf16", "O1"}, {"bf16", "O2"},
      {"fp16", "O1"}, {"fp16", "O2"}, {"fp8", "O1"},
  };
  return schemes;
}

bool scheme_applies(const Scheme& scheme, const ModelDims& dims) {
  return scheme.precision != "fp8" || dims.family == Family::gpt || dims.family == Family::llama;
}

MemoryEstimate estimate_memory(const ModelDims& dims, const Scheme& scheme,
                               config::OptimizerKind optimizer, double momentum,
                               int64_t micro_batch) {
  const auto p = count_parameters(dims);
  MemoryEstimate m;
  if (scheme.opt_level == "O2") {
    // Half weights and gradients, norms kept in fp32 (their own masters); fp32 masters of the
    // rest (Apex's O2), the optimizer stepping them. The fp32 master gradients exist only
    // around the optimizer step (precision/master_weights.h).
    const int64_t half = p.total - p.norm;
    m.weights = 2 * half + 4 * p.norm;
    m.gradients = m.weights;
    m.masters = 4 * half;
    m.step_transient = 4 * half;
  } else {
    m.weights = 4 * p.total;
    m.gradients = 4 * p.total;
  }
  const int64_t states = optimizer == config::OptimizerKind::adamw ? 2 : momentum > 0.0 ? 1 : 0;
  m.optimizer = 4 * states * p.total;
  if (scheme.opt_level == "O1" && scheme.precision == "fp8") {
    m.cast_copies = p.fp8_linear_weights + 2 * (p.matmul_weights - p.fp8_linear_weights);
  } else if (scheme.opt_level == "O1") {
    m.cast_copies = 2 * p.matmul_weights;
  }
  switch (dims.family) {
    case Family::gpt:
      m.activations = gpt_activations(dims, scheme, micro_batch, false);
      m.activations_checkpointed = gpt_activations(dims, scheme, micro_batch, true);
      break;
    case Family::llama:
      m.activations = llama_activations(dims, scheme, micro_batch, false);
      m.activations_checkpointed = llama_activations(dims, scheme, micro_batch, true);
      break;
    case Family::mlp:
      m.activations = mlp_activations(dims, scheme, micro_batch);
      break;
    case Family::cnn:
      m.activations = cnn_activations(dims, scheme, micro_batch);
      break;
  }
  return m;
}

MemoryEstimate shard_memory(const MemoryEstimate& whole, const ModelDims& dims,
                            const Sharding& sharding) {
  MemoryEstimate m = whole;
  if (!sharding.active()) return m;
  const int64_t n = sharding.world_size;
  const auto slice = [n](int64_t bytes) { return (bytes + n - 1) / n; };
  const int64_t shard = 4 * slice(count_parameters(dims).total);  // fp32, one rank's slice
  if (sharding.zero_stage < 2) m.gradients += whole.gradients;  // the buckets' copy
  if (sharding.zero_stage == 0) return m;
  m.masters = shard;
  m.optimizer = slice(whole.optimizer);
  // The step reads the fp32 gradient shard: no fp32 master gradients are made for it.
  m.step_transient = 0;
  m.gradients = sharding.zero_stage == 1 ? m.gradients + shard : shard;
  return m;
}

}  // namespace ampt::models
