#include "ampt/plan/memory_estimate.h"

#include "ampt/models/layer_inventory.h"
#include "ampt/precision/row_scaled.h"
#include "ampt/precision/nf4.h"

#include "ampt/config/enum_names.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace ampt::plan {
namespace {

using config::OptLevel;

// Bytes per element of the weights that do not train: a LoRA base, held in the half dtype every
// stage computes in (fp8's is bf16), fp32 in fp32 runs.
int64_t frozen_width(const Scheme& s) { return s.precision == Precision::fp32 ? 4 : 2; }

// What --base_dtype keeps of a block Linear's weight, as its storage holds it.
int64_t quantized_bytes(const models::LinearLayer& layer, config::BaseDtype format) {
  switch (format) {
    case config::BaseDtype::nf4: return precision::nf4_bytes(layer.in * layer.out);
    case config::BaseDtype::int8:
    case config::BaseDtype::fp8: return precision::row_scaled_bytes(layer.out, layer.in);
    default: return 2 * layer.in * layer.out;  // bf16, fp16
  }
}

// The matrices --base_dtype stores: the blocks' Linear weights and the stacked expert weights.
std::vector<models::LinearLayer> stored_matrices(const ModelDims& d) {
  auto out = d.layers.linears;
  out.insert(out.end(), d.terms.stacked_weights.begin(), d.terms.stacked_weights.end());
  return out;
}

}  // namespace

ParameterCounts count_parameters(const ModelDims& d) {
  ParameterCounts p;
  const auto linears = linear_counts(d.layers.linears);
  // The blocks' Linear weights, then the head's (GPT's is the tied wte).
  p.fp8_linear_weights = linears.weights;
  p.matmul_weights = linears.weights + d.layers.head_in * d.layers.head_out +
                     d.terms.other_matmul_weights;
  p.norm = d.terms.norm;
  p.total = d.terms.parameters;
  p.trainable = p.total;
  if (d.lora.active()) {
    p.trainable = 0;
    for (const auto& layer : d.lora.adapted) p.trainable += layer.lora_parameters(d.lora.rank);
    p.total += p.trainable;
  }
  return p;
}

const std::vector<Scheme>& memory_schemes() {
  static const std::vector<Scheme> schemes = {
      {Precision::fp32, OptLevel::O0}, {Precision::bf16, OptLevel::O1},
      {Precision::bf16, OptLevel::O2}, {Precision::fp16, OptLevel::O1},
      {Precision::fp16, OptLevel::O2}, {Precision::fp8, OptLevel::O1},
  };
  return schemes;
}

bool scheme_applies(const Scheme& scheme, const ModelDims& dims) {
  return scheme.precision != Precision::fp8 ||
         (dims.transformer() && dims.lora.base_dtype == config::BaseDtype::auto_select);
}

bool scheme_runs(const Scheme& scheme, const ModelDims& dims, const Sharding& sharding) {
  const bool o2_refused = sharding.active() && sharding.zero_stage > 0 &&
                          sharding.expert_parallel > 1 && scheme.opt_level == OptLevel::O2;
  return scheme_applies(scheme, dims) && !o2_refused;
}

MemoryEstimate estimate_memory(const ModelDims& dims, const Scheme& scheme,
                               config::OptimizerKind optimizer, double momentum,
                               int64_t micro_batch) {
  const auto p = count_parameters(dims);
  const bool lora = dims.lora.active();
  // What trains: every parameter, or LoRA's adapters (matmul weights, no norms).
  const int64_t trained_norm = lora ? 0 : p.norm;
  MemoryEstimate m;
  if (scheme.opt_level == OptLevel::O2) {
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
    if (dims.lora.base_dtype != config::BaseDtype::auto_select) {
      // The block Linear (and expert) weights quantized, and one of them dequantized at a time
      // (the largest) in the dtype the GEMM runs in.
      int64_t largest = 0;
      for (const auto& layer : stored_matrices(dims)) {
        m.frozen_weights += quantized_bytes(layer, dims.lora.base_dtype) -
                            frozen_width(scheme) * layer.in * layer.out;
        largest = std::max(largest, layer.in * layer.out);
      }
      m.frozen_weights += frozen_width(scheme) * largest;
    }
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
  if (scheme.opt_level == OptLevel::O1 && scheme.precision == Precision::fp8) {
    m.cast_copies = p.fp8_linear_weights + 2 * (fp32_matmul - (lora ? 0 : p.fp8_linear_weights));
  } else if (scheme.opt_level == OptLevel::O1) {
    m.cast_copies = 2 * fp32_matmul;
  }
  // Padded preference pairs are two sequences each.
  const int64_t rows = dims.preference.padded ? 2 * micro_batch : micro_batch;
  m.activations = dims.terms.activations(dims, scheme, rows, false);
  if (dims.transformer()) {
    m.activations_checkpointed = dims.terms.activations(dims, scheme, rows, true);
  }
  // The preference and rollout losses read the logits whole, in the compute dtype, and keep them
  // for backward (kernels/token_log_probs.h), whose gradient of them is as large: beyond the
  // fused head's chunk that the activations count. A preference loss's of every position, a
  // rollout's of the completion's alone (Batch::logit_rows).
  const int64_t logit_positions = dims.preference.active ? dims.seq_len
                                  : dims.rollout.active  ? dims.rollout.completion_length
                                                         : 0;
  if (logit_positions > 0) {
    const int64_t logits = 2 * rows * logit_positions * dims.classes * frozen_width(scheme);
    m.activations += logits;
    if (m.activations_checkpointed >= 0) m.activations_checkpointed += logits;
  }
  if (dims.rollout.active) {
    // The sampler (models/generation.h): every completion's keys and values for the prompt and
    // the completion, in the compute dtype; the decode step's logits with the draw's float32
    // copies (scores, probabilities, the log-probability's) and float64 CDF.
    const int64_t sampled = dims.rollout.completions;
    m.sampler = sampled * dims.seq_len * dims.terms.cache_width * frozen_width(scheme) +
                sampled * dims.classes * (frozen_width(scheme) + 3 * 4 + 8);
  }
  if (dims.preference.reference_copy || dims.rollout.reference_copy) {
    // The frozen reference: its matmul weights in the compute dtype, the rest in fp32.
    m.reference_weights = frozen_width(scheme) * p.matmul_weights + 4 * (p.total - p.matmul_weights);
    m.weights += m.reference_weights;
  }
  return m;
}

BlockSplit split_blocks(const ModelDims& d) {
  const auto p = count_parameters(d);
  BlockSplit s;
  s.blocks = static_cast<int64_t>(d.layers.blocks.size());
  if (d.lora.active()) {
    // The adapters: A [r, in] and B [out, r] per adapted layer (r · E rows and columns on an
    // expert group), matmul weights without biases.
    int64_t in_blocks = 0;
    for (const auto& layer : d.lora.adapted) {
      const int64_t adapter = layer.lora_parameters(d.lora.rank);
      (!layer.block.empty() && s.blocks > 0 ? in_blocks : s.root) += adapter;
    }
    if (s.blocks > 0) s.block_linear = s.block_linear_weights = (in_blocks + s.blocks - 1) / s.blocks;
    return s;
  }
  const auto block = linear_counts(d.layers.block_linears());
  s.block_linear_weights = block.weights;
  s.block_linear = block.weights + block.biases;
  s.block_norm = d.terms.block_norm;
  s.root_norm = d.terms.norm - s.blocks * s.block_norm;
  std::map<std::string, int64_t> per_block;
  for (const auto& stack : d.terms.stacked_weights) {
    per_block[stack.block] += stack.in * stack.out;
    s.experts += stack.in * stack.out;
  }
  for (const auto& [name, experts] : per_block) s.block_experts = std::max(s.block_experts, experts);
  s.root = p.total - s.blocks * (s.block_linear + s.block_norm) - s.experts;
  return s;
}

// A LoRA base's frozen bytes on one rank at stage 3, which shards them in their storage form
// (distributed/sharded_parameters.h's frozen units): 1/N of them kept, and whole at once the
// root's (embeddings, final norm, head: gathered for the step) and `gathered` blocks'; a
// quantized base's one dequantized weight as in one process.
int64_t frozen_per_rank(const MemoryEstimate& whole, const ModelDims& dims, const Scheme& scheme,
                        int64_t ranks, int64_t gathered) {
  const int64_t width = frozen_width(scheme);
  const auto format = dims.lora.base_dtype;
  int64_t linears = 0, largest = 0;
  for (const auto& layer : stored_matrices(dims)) {
    linears += format == config::BaseDtype::auto_select ? width * layer.in * layer.out
                                                        : quantized_bytes(layer, format);
    largest = std::max(largest, layer.in * layer.out);
  }
  const int64_t transient = format == config::BaseDtype::auto_select ? 0 : width * largest;
  const int64_t stored = whole.frozen_weights - transient;
  const int64_t blocks = static_cast<int64_t>(dims.layers.blocks.size());
  if (blocks == 0) return whole.frozen_weights;
  const int64_t in_blocks = linears + width * linear_counts(dims.layers.linears).biases +
                            4 * blocks * dims.terms.block_norm;
  const int64_t root = stored - in_blocks;
  return (stored + ranks - 1) / ranks + root + gathered * (in_blocks / blocks) + transient;
}

MemoryEstimate shard_memory(const MemoryEstimate& whole, const ModelDims& dims,
                            const Scheme& scheme, const Sharding& sharding) {
  MemoryEstimate m = whole;
  if (!sharding.active()) return m;
  const int64_t n = sharding.world_size;
  const auto slice = [n](int64_t bytes) { return (bytes + n - 1) / n; };
  const auto s = split_blocks(dims);
  const int64_t trainable = count_parameters(dims).trainable;
  // Expert parallelism's experts stay whole on their ranks, outside ZeRO's shards (a LoRA run
  // trains none of them).
  const int64_t divided = sharding.expert_parallel > 1 && !dims.lora.active() ? s.experts : 0;
  const int64_t sharded_parameters = trainable - divided;
  if (sharding.zero_stage < 2) {
    // The buckets' copy, of every gradient but a divided expert group's.
    m.gradients += divided == 0 ? whole.gradients
                                : static_cast<int64_t>(static_cast<double>(whole.gradients) *
                                                       static_cast<double>(sharded_parameters) /
                                                       static_cast<double>(trainable));
  }
  if (sharding.zero_stage == 0) return m;
  const int64_t shard = 4 * slice(sharded_parameters);  // fp32, one rank's slice
  const int64_t optimizer_per_parameter = trainable > 0 ? whole.optimizer / trainable : 0;
  const int64_t optimizer_shard = slice(optimizer_per_parameter * sharded_parameters);
  // The replicas of an expert group share its experts' optimizer state when each stack's rows
  // divide among them (train/expert_parallel.h's replica_shares).
  const int64_t replicas = divided > 0 ? n / sharding.expert_parallel : 1;
  const bool share = replicas > 1 && std::ranges::all_of(dims.terms.stacked_weights, [&](const auto& s) {
    return s.experts % replicas == 0;
  });
  const int64_t expert_optimizer = optimizer_per_parameter * divided / (share ? replicas : 1);
  // O2 is refused beside expert parallelism (train/train_state.h): the experts are fp32 here.
  const int64_t experts = 4 * divided;
  m.masters = shard;
  m.optimizer = optimizer_shard + expert_optimizer;
  // The step reads the fp32 gradient shard: no fp32 master gradients are made for it.
  m.step_transient = 0;
  m.gradients = sharding.zero_stage == 1 ? m.gradients + shard : shard + experts;
  m.sharded = m.masters + optimizer_shard + shard + (share ? expert_optimizer : 0);
  if (sharding.zero_stage < 3) return m;

  // Stage 3: the fp32 master shard is all a rank keeps of the weights between uses. Whole
  // weights exist, at the backward's peak (counted as if all at once, a little above the
  // truth), for:
  // - the root, gathered for the whole step in the dtype the unsharded run holds it in: fp32
  //   under O0 and O1, the half dtype under O2 except the final norm (fp32);
  // - at most two blocks (the one computing and the one prefetched): their Linear weights and
  //   biases in --param_dtype (auto: the compute dtype, half under O1/O2 and fp8, fp32 in
  //   fp32/O0), their norms in fp32 under every scheme, as the unsharded run keeps them, and
  //   their experts in their own dtype (fp32 under O1; kept whole instead under expert
  //   parallelism);
  // - with LoRA, the frozen base: 1/N of its bytes, the root's and two blocks' whole
  //   (frozen_per_rank).
  // Whole gradients: the root's, in its own dtype, until the end of backward, and those of at
  // most two blocks in flight to the reduce-scatter, in --reduce_dtype (grad: the parameters'
  // own); each rank keeps its fp32 gradient shard from them.
  const int64_t gathered = std::min<int64_t>(2, s.blocks);
  const bool half_root = scheme.opt_level == OptLevel::O2;
  const int64_t linear_bytes =
      sharding.param_bytes > 0 ? sharding.param_bytes : scheme.precision == Precision::fp32 ? 4 : 2;
  const int64_t root_bytes = (half_root ? 2 : 4) * (s.root - s.root_norm) + 4 * s.root_norm;
  const int64_t block_experts = divided > 0 ? 0 : s.block_experts;
  const int64_t expert_bytes = half_root ? 2 : 4;
  const int64_t block_bytes =
      linear_bytes * s.block_linear + 4 * s.block_norm + expert_bytes * block_experts;
  const int64_t block_gradient_bytes =
      sharding.reduce_bytes > 0 ? sharding.reduce_bytes * (s.block_linear + s.block_norm + block_experts)
                                : block_bytes;
  const int64_t frozen =
      dims.lora.active() ? frozen_per_rank(whole, dims, scheme, n, gathered) : 0;
  m.weights = frozen + root_bytes + gathered * block_bytes + experts;
  m.frozen_weights = frozen;
  m.gradients = shard + root_bytes + gathered * block_gradient_bytes + experts;
  // O1's half casts of the blocks' matmul weights are not made when the blocks are gathered in
  // half already (autocast keeps a half weight as it is); the root's head still has its cast,
  // fp8's blocks their e4m3 copies (saved for backward: every block's, as in one process), and
  // blocks gathered in fp32 their casts (autocast's cache and backward keep every block's).
  if (scheme.opt_level == OptLevel::O1 && linear_bytes == 2) {
    const bool casts_blocks = scheme.precision != Precision::fp8 || dims.lora.active();
    if (casts_blocks) m.cast_copies -= 2 * s.blocks * s.block_linear_weights;
  }
  return m;
}

}  // namespace ampt::plan
