#include "ampt/models/memory_estimate.h"

#include "ampt/models/lora_layers.h"
#include "ampt/models/model_family.h"

#include "ampt/core/errors.h"
#include "ampt/kernels/fused_classifier.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <set>

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

// Bytes per element of the weights that do not train: a LoRA base, held in the half dtype every
// stage computes in (fp8's is bf16), fp32 in fp32 runs.
int64_t frozen_width(const Scheme& s) { return s.precision == "fp32" ? 4 : 2; }

// The head and the loss at the start of backward. Plain: ln_f's input and output, then per logit
// the fp32 log-probabilities saved by log_softmax and two gradients of that size. Fused
// (kernels/fused_classifier.h): ln_f's input, the fp32 gradients of the hidden states and of the
// head's weight that the forward computed (none for a frozen LoRA base's weight), and their
// scaled copies that backward hands on (the hidden states' in the matmul dtype, the weight's in
// fp32); the forward's one chunk of fp32 logits at a time (about 2^26).
int64_t head_bytes(const ModelDims& d, const Scheme& s, int64_t tokens, int64_t C, int64_t V) {
  const auto [r, h] = widths(s);
  if (!d.fused_kernels) return tokens * C * (r + h) + tokens * V * kLossBytesPerLogit;
  const int64_t chunk_rows = std::min(tokens, kernels::default_chunk_rows(V));
  const int64_t weight = d.lora.active() ? 0 : 8 * V * C;
  return tokens * C * (r + 4 + h) + weight + chunk_rows * V * 4;
}

// How LoRA changes what a block saves, against a full fine-tune's count. The adapters add, per
// adapted layer, the r-wide intermediate B reads and A's own copy of the input where it is not a
// tensor already saved: after dropout (with dropout's 1-byte mask), or under O1 the half cast of
// a norm's fp32 output that each Llama projection makes for its base's GEMM and its adapter's
// (the Linear seam casts once per layer, linear.h: a GPT's base keeps that same cast).
// A GPT's Linear layers and MLP run in ampt's own autograd functions, which keep their inputs
// frozen or not. A Llama's are plain at::linear, whose autograd keeps an input only for the
// weight's gradient: a frozen layer keeps none, so the count loses each norm's output as the
// matmuls see it and down_proj's input, and an adapter keeps the input it reads (one tensor for
// the layers that read the same one). Over all blocks, or one block's when checkpointing
// recomputes one block at a time.
int64_t lora_activations(const ModelDims& d, const Scheme& s, int64_t tokens, bool checkpointed) {
  if (!d.lora.active()) return 0;
  const auto [r, h] = widths(s);
  const bool llama = d.family == Family::llama;
  const auto blocks = static_cast<int64_t>(d.layers.blocks.size());
  int64_t bytes = llama ? -blocks * tokens * (2 * d.llama.n_embd + d.llama.intermediate) * h : 0;
  std::set<std::string> kept;  // the inputs an adapter already keeps: module path, norm or not
  for (const auto& layer : d.lora.adapted) {
    bytes += tokens * d.lora.rank * h;
    const auto input =
        layer.name.substr(0, layer.name.rfind('.')) + (layer.reads_norm() ? "+norm" : "");
    if (d.lora.dropout > 0.0) {
      bytes += tokens * layer.in * (h + 1);
    } else if (llama && layer.reads_norm() && r > h) {
      bytes += tokens * layer.in * h;
    } else if (llama && kept.insert(input).second) {
      bytes += tokens * layer.in * h;
    }
  }
  return checkpointed ? bytes / blocks : bytes;
}

// The fused GELU MLP has no place for an adapter's update: an adapted MLP runs unfused.
bool adapts_mlp(const ModelDims& d) {
  return std::ranges::any_of(d.lora.adapted, [](const LinearLayer& l) {
    return l.role == LinearRole::fc || l.role == LinearRole::down;
  });
}

// The Linear layers' weights (in · out each) and biases of `layers`.
struct LinearCounts {
  int64_t weights = 0, biases = 0;
};
LinearCounts linear_counts(const std::vector<LinearLayer>& layers) {
  LinearCounts counts;
  for (const auto& l : layers) {
    counts.weights += l.in * l.out;
    if (l.bias) counts.biases += l.out;
  }
  return counts;
}

int64_t gpt_activations(const ModelDims& d, const Scheme& s, int64_t b, bool checkpointed) {
  const auto [r, h] = widths(s);
  const int64_t T = d.seq_len, C = d.gpt.n_embd, L = d.gpt.n_layer;
  const int64_t tokens = b * T;
  // Per block besides the channel-wide tensors: SDPA's fp32 log-sum-exp per head and token, and
  // the two LayerNorms' fp32 mean and rstd per token.
  const bool fused_mlp = d.fused_kernels && !adapts_mlp(d);
  const int64_t block = tokens * C * gpt_block_bytes_per_token_channel(s, fused_mlp) +
                        tokens * d.gpt.n_head * 4 + tokens * 16;
  // Checkpointing keeps each block's input and recomputes one block at a time in backward.
  const int64_t blocks = checkpointed ? L * tokens * C * r + block : L * block;
  const int64_t data = tokens * 2 * 8;  // int64 inputs and targets
  const int64_t norm_stats = tokens * 8;  // ln_f's mean and rstd
  // The fused MLP's backward (kernels/gelu_mlp.h) holds, one block at a time, the gradients of
  // its GELU's output and of c_fc's output [tokens, 4C] together, with the gradient arriving
  // from c_proj and the residual stream's [tokens, C]: more than the head's transient, which is
  // gone by then. The peak is the larger of the two (measured: what a GPT LoRA run's estimate
  // lacked, 13%, and a full fine-tune's, 9%, in fp32).
  const int64_t mlp_backward = fused_mlp && s.precision != "fp8" ? tokens * C * (8 * h + r + h) : 0;
  return data + blocks + norm_stats +
         std::max(head_bytes(d, s, tokens, C, d.gpt.vocab_size), mlp_backward) +
         lora_activations(d, s, tokens, checkpointed);
}

// A Llama block's saved tensors per token (not measured yet; counted from what autograd keeps):
// the RMSNorms' fp32 inputs and their outputs as the matmuls see them, q, k and v before and after
// the rotation, the attention output, SDPA's log-sum-exp per head, and the SwiGLU MLP's gate and
// up outputs, the SiLU and the product that down_proj reads (4 · intermediate).
int64_t llama_activations(const ModelDims& d, const Scheme& s, int64_t b, bool checkpointed) {
  const auto [r, h] = widths(s);
  const auto& m = d.llama;
  const int64_t T = d.seq_len, C = m.n_embd, L = m.n_layer, kv = m.n_kv_head * m.head_dim();
  const int64_t q = m.query_width();
  const int64_t tokens = b * T;
  const int64_t per_token = 2 * (4 * C + 4 + C * h) + 2 * (q + 2 * kv) * h + q * h +
                            m.n_head * 4 + 4 * m.intermediate * h;
  const int64_t block = tokens * per_token;
  const int64_t blocks = checkpointed ? L * tokens * C * r + block : L * block;
  return tokens * 2 * 8 + blocks + tokens * 4 + head_bytes(d, s, tokens, C, m.vocab_size) +
         lora_activations(d, s, tokens, checkpointed);
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
  auto dims = family_of(config).memory_dims(config, std::move(input_shape), seq_len);
  dims.lora = lora_dims(config, dims);
  return dims;
}

ParameterCounts count_parameters(const ModelDims& d) {
  ParameterCounts p;
  const auto linears = linear_counts(d.layers.linears);
  // The blocks' Linear weights, then the head's (GPT's is the tied wte).
  p.fp8_linear_weights = linears.weights;
  p.matmul_weights = linears.weights + d.layers.head_in * d.layers.head_out;
  switch (d.family) {
    case Family::gpt: {
      const int64_t L = d.gpt.n_layer, C = d.gpt.n_embd;
      p.norm = (2 * L + 1) * 2 * C;
      // The embeddings: wte once (it is the head), wpe.
      p.total = p.matmul_weights + p.norm + linears.biases + d.gpt.block_size * C;
      break;
    }
    case Family::llama: {
      // input/post-attention norms, Qwen3's q/k norms, the final norm.
      p.norm = d.llama.n_layer * (2 * d.llama.n_embd + (d.llama.qk_norm ? 2 * d.llama.head_dim() : 0)) +
               d.llama.n_embd;
      p.total = d.llama.parameters();
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
  p.trainable = p.total;
  if (d.lora.active()) {
    p.trainable = 0;
    for (const auto& layer : d.lora.adapted) p.trainable += d.lora.rank * (layer.in + layer.out);
    p.total += p.trainable;
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
  return scheme.precision != "fp8" || dims.transformer();
}

MemoryEstimate estimate_memory(const ModelDims& dims, const Scheme& scheme,
                               config::OptimizerKind optimizer, double momentum,
                               int64_t micro_batch) {
  const auto p = count_parameters(dims);
  const bool lora = dims.lora.active();
  // What trains: every parameter, or LoRA's adapters (matmul weights, no norms).
  const int64_t trained_norm = lora ? 0 : p.norm;
  MemoryEstimate m;
  if (scheme.opt_level == "O2") {
    // Half weights and gradients, norms kept in fp32 (their own masters); fp32 masters of the
    // rest (Apex's O2), the optimizer stepping them. The fp32 master gradients exist only
    // around the optimizer step (precision/master_weights.h).
    const int64_t half = p.trainable - trained_norm;
    m.weights = 2 * half + 4 * trained_norm;
    m.gradients = m.weights;
    m.masters = 4 * half;
    m.step_transient = 4 * half;
  } else {
    m.weights = 4 * p.trainable;
    m.gradients = 4 * p.trainable;
  }
  if (lora) {
    // The frozen base: no gradients, masters or optimizer state; its norms stay fp32 (islands).
    const int64_t base = p.total - p.trainable;
    m.frozen_weights = frozen_width(scheme) * (base - p.norm) + 4 * p.norm;
    m.weights += m.frozen_weights;
  }
  const int64_t states = optimizer == config::OptimizerKind::adamw ? 2 : momentum > 0.0 ? 1 : 0;
  m.optimizer = 4 * states * p.trainable;
  // O1 holds a half copy of each matmul weight held in fp32 (--half_weights, written by the
  // optimizer step; without it, autocast's casts, made each forward and held through backward:
  // the same bytes at the peak): all of them, or with LoRA only the adapters' (the base is held
  // in half already). fp8's Linear layers take e4m3 copies of the blocks' weights instead,
  // frozen or not.
  const int64_t fp32_matmul = lora ? p.trainable : p.matmul_weights;
  if (scheme.opt_level == "O1" && scheme.precision == "fp8") {
    m.cast_copies = p.fp8_linear_weights + 2 * (fp32_matmul - (lora ? 0 : p.fp8_linear_weights));
  } else if (scheme.opt_level == "O1") {
    m.cast_copies = 2 * fp32_matmul;
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

BlockSplit split_blocks(const ModelDims& d) {
  const auto p = count_parameters(d);
  BlockSplit s;
  s.blocks = static_cast<int64_t>(d.layers.blocks.size());
  if (d.lora.active()) {
    // The adapters: A [r, in] and B [out, r] per adapted layer, matmul weights without biases.
    int64_t in_blocks = 0;
    for (const auto& layer : d.lora.adapted) {
      const int64_t adapter = d.lora.rank * (layer.in + layer.out);
      (!layer.block.empty() && s.blocks > 0 ? in_blocks : s.root) += adapter;
    }
    if (s.blocks > 0) s.block_linear = s.block_linear_weights = (in_blocks + s.blocks - 1) / s.blocks;
    return s;
  }
  const auto block = linear_counts(d.layers.block_linears());
  s.block_linear_weights = block.weights;
  s.block_linear = block.weights + block.biases;
  switch (d.family) {
    case Family::gpt:
      s.block_norm = 2 * 2 * d.gpt.n_embd;  // ln_1, ln_2: weight and bias
      s.root_norm = 2 * d.gpt.n_embd;       // ln_f
      break;
    case Family::llama:
      // input_layernorm, post_attention_layernorm, Qwen3's q_norm and k_norm
      s.block_norm = 2 * d.llama.n_embd + (d.llama.qk_norm ? 2 * d.llama.head_dim() : 0);
      s.root_norm = d.llama.n_embd;       // norm
      break;
    case Family::mlp:
    case Family::cnn:
      s.root_norm = p.norm;  // CNN's BatchNorms
      break;
  }
  s.root = p.total - s.blocks * (s.block_linear + s.block_norm);
  return s;
}

MemoryEstimate shard_memory(const MemoryEstimate& whole, const ModelDims& dims,
                            const Scheme& scheme, const Sharding& sharding) {
  MemoryEstimate m = whole;
  if (!sharding.active()) return m;
  const int64_t n = sharding.world_size;
  const auto slice = [n](int64_t bytes) { return (bytes + n - 1) / n; };
  const int64_t shard = 4 * slice(count_parameters(dims).trainable);  // fp32, one rank's slice
  if (sharding.zero_stage < 2) m.gradients += whole.gradients;  // the buckets' copy
  if (sharding.zero_stage == 0) return m;
  m.masters = shard;
  m.optimizer = slice(whole.optimizer);
  // The step reads the fp32 gradient shard: no fp32 master gradients are made for it.
  m.step_transient = 0;
  m.gradients = sharding.zero_stage == 1 ? m.gradients + shard : shard;
  m.sharded = m.masters + m.optimizer + shard;
  if (sharding.zero_stage < 3) return m;

  // Stage 3: the fp32 master shard is all a rank keeps of the weights between uses. Whole
  // weights exist, at the backward's peak (counted as if all at once, a little above the
  // truth), for:
  // - the root, gathered for the whole step in the dtype the unsharded run holds it in: fp32
  //   under O0 and O1, the half dtype under O2 except the final norm (fp32);
  // - at most two blocks (the one computing and the one prefetched): their Linear weights and
  //   biases in --param_dtype (auto: the compute dtype, half under O1/O2 and fp8, fp32 in
  //   fp32/O0), their norms in fp32 under every scheme, as the unsharded run keeps them;
  // - with LoRA, the frozen base, which ZeRO does not shard, as in one process.
  // Whole gradients: the root's, in its own dtype, until the end of backward, and those of at
  // most two blocks in flight to the reduce-scatter, in --reduce_dtype (grad: the parameters'
  // own); each rank keeps its fp32 gradient shard from them.
  const auto s = split_blocks(dims);
  const int64_t gathered = std::min<int64_t>(2, s.blocks);
  const bool half_root = scheme.opt_level == "O2";
  const int64_t linear_bytes =
      sharding.param_bytes > 0 ? sharding.param_bytes : scheme.precision == "fp32" ? 4 : 2;
  const int64_t root_bytes = (half_root ? 2 : 4) * (s.root - s.root_norm) + 4 * s.root_norm;
  const int64_t block_bytes = linear_bytes * s.block_linear + 4 * s.block_norm;
  const int64_t block_gradient_bytes = sharding.reduce_bytes > 0
                                           ? sharding.reduce_bytes * (s.block_linear + s.block_norm)
                                           : block_bytes;
  m.weights = whole.frozen_weights + root_bytes + gathered * block_bytes;
  m.gradients = shard + root_bytes + gathered * block_gradient_bytes;
  // O1's half casts of the blocks' matmul weights are not made when the blocks are gathered in
  // half already (autocast keeps a half weight as it is); the root's head still has its cast,
  // fp8's blocks their e4m3 copies (saved for backward: every block's, as in one process), and
  // blocks gathered in fp32 their casts (autocast's cache and backward keep every block's).
  if (scheme.opt_level == "O1" && linear_bytes == 2) {
    const bool casts_blocks = scheme.precision != "fp8" || dims.lora.active();
    if (casts_blocks) m.cast_copies -= 2 * s.blocks * s.block_linear_weights;
  }
  return m;
}

}  // namespace ampt::models
