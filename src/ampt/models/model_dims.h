// What the memory estimate (plan/) needs to know about a model, without building it: its
// layer inventory and the terms its family works out from its own dimensions (FamilyTerms), and
// the precision schemes those terms are counted in. Each family's memory_dims fills it.
#pragma once

#include "ampt/config/config.h"
#include "ampt/models/layer_inventory.h"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace ampt::models {

// LoRA (--lora_rank > 0, lora_layers.h): the base is frozen and the adapters on `adapted`, the
// layers --lora_targets selects, are what trains.
struct LoraDims {
  int64_t rank = 0;  // 0: no adapters, every parameter trains
  double dropout = 0.0;
  std::vector<std::string> targets;  // --lora_targets, or the family's default
  std::vector<std::string> parameters;  // --lora_target_parameters
  std::vector<LinearLayer> adapted;
  // How the frozen base's block Linear weights are stored (--base_dtype).
  config::BaseDtype base_dtype = config::BaseDtype::auto_select;
  bool active() const { return rank > 0; }
};

// A preference objective's batches and reference model (train/objective.h), as they weigh on
// memory.
struct PreferenceDims {
  bool active = false;
  // --packing=false: each pair is two padded rows, so a micro-batch of n pairs is 2n sequences
  // (packed, a micro-batch is n windows, as for any language model).
  bool padded = false;
  // dpo and ipo full fine-tuning, without --precompute_ref_logps: a frozen copy of the model.
  bool reference_copy = false;
};

// --objective grpo's and distill's rollouts (train/rollout.h), as they weigh on memory (distill's
// teacher, a model of its own dimensions, is not counted): each rank samples its
// batch_size x grad_accum_steps completions at once into one KV cache, then trains on them
// batch_size at a time, the head run on the completion's positions alone.
struct RolloutDims {
  bool active = false;
  int64_t completions = 0;        // sampled at once
  int64_t completion_length = 0;  // --max_completion_length
  // beta > 0 in full fine-tuning: a frozen copy of the model as the KL's reference.
  bool reference_copy = false;
};

struct ModelDims;
struct Scheme;

// What a family contributes to the estimate besides its layer inventory, worked out by its own
// memory_dims from its own dimensions: the estimate knows no family.
struct FamilyTerms {
  std::string description;  // recommend's model line: "n_layer 12, n_embd 768, ..."
  int64_t parameters = 0;   // all of them, adapters apart: models::parameter_count's
  // Matmul weights outside the inventory's Linear layers and head (an MLP's layers, a CNN's
  // convolutions and classifier).
  int64_t other_matmul_weights = 0;
  // Of those, the ones a LoRA base stores as --base_dtype stores the Linears': a sparse block's
  // expert weights, each [E, out, in] stack as one [E·out, in] matrix (its storage and its
  // dequantized copy are the whole stack's).
  std::vector<LinearLayer> stacked_weights;
  // Families that generate: the elements one token's keys and values take in the KV cache,
  // over every block (kv_cache.h); 0: the family does not generate.
  int64_t cache_width = 0;
  int64_t norm = 0;        // norm weights and biases (fp32 under O2)
  int64_t block_norm = 0;  // of those, one block's (transformers)
  // Bytes saved for backward at `micro_batch` samples, with the loss's and the backward's
  // transients; `checkpointed`: with --grad_ckpt (transformers only).
  std::function<int64_t(const ModelDims& dims, const Scheme& scheme, int64_t micro_batch,
                        bool checkpointed)>
      activations;
};

// What the estimate needs to know about a model and one sample of its data.
struct ModelDims {
  std::string name;                  // the --model value
  int64_t seq_len = 0;               // language models: tokens per sample
  std::vector<int64_t> input_shape;  // MLP: {features} (or any shape, flattened); CNN: {C, H, W}
  int64_t classes = 0;               // language models: the vocabulary (the head's rows)
  // Transformers: --fused_kernels (the chunked head and loss; a GPT's MLP recomputing its GELU on
  // a GPU).
  bool fused_kernels = true;
  // A run on the CPU (--device cpu), where the fused GELU MLP keeps its GELU's output for
  // backward (kernels/gelu_mlp.h); elsewhere the estimate plans for a GPU.
  bool cpu = false;
  LoraDims lora;
  PreferenceDims preference;
  RolloutDims rollout;
  // Transformers: the blocks and their Linear layers, as the built model has them.
  LayerInventory layers;
  FamilyTerms terms;
  // Transformer blocks, which activation checkpointing, fp8 and ZeRO-3 work on.
  bool transformer() const { return layers.transformer(); }
};

// The configured model; `input_shape` (MLP/CNN) empty means the synthetic data's (features, or
// 3x32x32 images) and `seq_len` 0 means the GPT's block_size. Throws UsageError for a GPT whose
// seq_len exceeds block_size, for an unknown model, and for LoRA settings training would refuse
// (a family without adapters, a target that matches no Linear layer).
ModelDims model_dims(const config::Config& config, std::vector<int64_t> input_shape,
                     int64_t seq_len);

// What a scheme computes in: fp32 (no mixed precision), bf16, fp16 or fp8.
enum class Precision { fp32, bf16, fp16, fp8 };
std::string_view to_string(Precision precision);  // "fp32", "bf16", "fp16", "fp8"

// A precision with an opt level: fp32/O0, bf16/O1, bf16/O2, fp16/O1, fp16/O2, fp8/O1.
struct Scheme {
  Precision precision = Precision::fp32;
  config::OptLevel opt_level = config::OptLevel::O0;
  std::string name() const;  // "bf16/O1"
  bool operator==(const Scheme&) const = default;
};

}  // namespace ampt::models
