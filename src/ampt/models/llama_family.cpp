// The Llama family: Llama 2/3, Qwen2, Qwen3, Mistral, Qwen3-MoE and Mixtral (llama.h), their
// presets (llama_presets.h), and Hugging Face LlamaForCausalLM, Qwen2ForCausalLM,
// Qwen3ForCausalLM, MistralForCausalLM, Qwen3MoeForCausalLM and MixtralForCausalLM checkpoints in
// and out.
#include "ampt/config/enum_names.h"
#include "ampt/core/errors.h"
#include "ampt/hf/llama_config.h"
#include "ampt/hf/llama_export.h"
#include "ampt/hf/llama_weights.h"
#include "ampt/hf/pretrained.h"
#include "ampt/models/family_support.h"
#include "ampt/models/flops.h"
#include "ampt/models/llama.h"
#include "ampt/models/memory_terms.h"
#include "ampt/models/model_family.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ampt::models {
namespace {

data::SampleRequest llama_request(const config::Config& config) {
  const auto dims = resolve_llama_dims(config);
  return {data::SampleRequest::Form::tokens, llama_window(config, dims), dims.vocab_size};
}

// "8 experts of width 32, top 2 renormalised, fp32 router, load-balancing loss x 0.001, ..."
std::string experts(const LlamaDims& d, bool router_losses) {
  const auto& m = d.moe;
  const int64_t sparse = d.sparse_blocks();
  const auto dense = sparse == d.n_layer ? std::string()
                                         : fmt::format(" in {} of {} blocks (the others dense, "
                                                       "intermediate {})",
                                                       sparse, d.n_layer, d.intermediate);
  const auto z = d.router_z_loss_coef > 0 ? fmt::format(", z-loss x {:g}", d.router_z_loss_coef) : "";
  // A preference loss reads the policy's logits alone, as TRL's trainers do unless the model's
  // config sets output_router_logits.
  const auto losses = router_losses ? fmt::format("load-balancing loss x {:g}{}", m.aux_loss_coef, z)
                                    : std::string("no router losses under a preference objective");
  return fmt::format("{} experts of width {}{}, top {}{}, fp32 router, {}, {} of {} parameters "
                     "active",
                     m.experts, m.intermediate, dense, m.top_k,
                     m.normalize_top_k ? " renormalised" : "", losses, d.active_parameters(),
                     d.parameters());
}

// `router_losses`: the objective adds a sparse model's router losses (lm does, the preference
// losses do not).
std::string architecture(const LlamaDims& d, bool grad_ckpt, bool router_losses) {
  std::string rope = fmt::format("rope_theta {:g}", d.rope_theta);
  if (d.rope_llama3) rope += fmt::format(" (llama3 scaling, factor {:g})", d.rope_llama3->factor);
  // A head width of the model's own (Qwen3's); config.json may repeat hidden / heads.
  const bool own_heads = d.query_width() != d.n_embd;
  const auto heads = own_heads ? fmt::format(", head_dim {}", d.head_dim()) : "";
  const auto mlp = d.moe.active() ? experts(d, router_losses)
                                  : fmt::format("intermediate {}", d.intermediate);
  std::string window;
  if (d.sliding_window > 0) {
    int64_t sliding = 0;
    for (int64_t layer = 0; layer < d.n_layer; ++layer) sliding += d.window(layer) > 0 ? 1 : 0;
    window = sliding == d.n_layer
                 ? fmt::format(", sliding window {}", d.sliding_window)
                 : fmt::format(", sliding window {} in {} of {} layers", d.sliding_window, sliding, d.n_layer);
  }
  return fmt::format("{}: n_layer {}, n_embd {}, n_head {}, n_kv_head {}{}, {}, "
                     "block_size {}{}, vocab_size {}, {}{}{}{}{}",
                     d.flavour, d.n_layer, d.n_embd, d.n_head, d.n_kv_head, heads, mlp,
                     d.block_size, window, d.vocab_size, rope, d.qkv_bias ? ", q/k/v biases" : "",
                     d.qk_norm ? ", q/k norms" : "", d.tied_head ? ", tied head" : "",
                     grad_ckpt ? ", blocks recomputed in backward" : "");
}

Model llama_build(const config::Config& config, const data::DataSpec& spec) {
  const LlamaDims dims = resolve_llama_dims(config);
  require_data(spec.task == data::Task::language_model && spec.sample_shape.size() == 1,
               config.model, "language-model token blocks", spec);
  const int64_t tokens = spec.sample_shape[0];
  if (spec.classes > dims.vocab_size) {
    throw UsageError(fmt::format("the dataset's vocabulary of {} tokens exceeds vocab_size {} "
                                 "(model {}): vocab_size must be at least {}",
                                 spec.classes, dims.vocab_size, config.model, spec.classes));
  }
  if (tokens > dims.block_size) {
    throw UsageError(fmt::format("the dataset's blocks of {} tokens exceed block_size {} (model "
                                 "{}): block_size must be at least {}",
                                 tokens, dims.block_size, config.model, tokens));
  }
  const int64_t kv = dims.n_kv_head * dims.head_dim();
  if (config.mixed_precision == config::MixedPrecision::fp8 &&
      (dims.n_embd % 16 != 0 || kv % 16 != 0 || dims.intermediate % 16 != 0 ||
       config.batch_size * tokens % 16 != 0)) {
    throw UsageError(fmt::format(
        "mixed_precision fp8 needs n_embd, the key/value width, the MLP width and batch_size x "
        "tokens per sample to be multiples of 16 (fp8 matmul tiles); model {} has {}, {}, {} and "
        "{} x {} = {}",
        config.model, dims.n_embd, kv, dims.intermediate, config.batch_size, tokens,
        config.batch_size * tokens));
  }
  Llama llama(dims);
  llama->set_grad_ckpt(config.grad_ckpt);
  // auto builds it fused: the run may turn the kernels off once it has measured (set_fused).
  const bool fused = config.fused_kernels != config::AutoSwitch::off;
  llama->set_fused(fused);
  auto model = decoder_model(llama, layer_inventory(dims), tokens);
  model.flops_per_sample = llama_training_flops_per_token(dims, tokens) * tokens;
  model.architecture =
      architecture(dims, config.grad_ckpt, config.objective == config::Objective::lm);
  model.set_fused = [llama](bool fused) mutable { llama->set_fused(fused); };
  return model;
}

// A Llama block's saved tensors per token (not measured yet; counted from what autograd keeps):
// the RMSNorms' fp32 inputs and their outputs as the matmuls see them, q, k and v before and after
// the rotation, the attention output, SDPA's log-sum-exp per head, and the SwiGLU MLP's gate and
// up outputs, the SiLU and the product that down_proj reads (4 · intermediate).
int64_t llama_activations(const LlamaDims& m, const ModelDims& d, const Scheme& s, int64_t b,
                          bool checkpointed) {
  const auto [r, h] = widths(s);
  const int64_t T = d.seq_len, C = m.n_embd, L = m.n_layer, kv = m.n_kv_head * m.head_dim();
  const int64_t q = m.query_width();
  const int64_t tokens = b * T;
  const int64_t attention = 2 * (4 * C + 4 + C * h) + 2 * (q + 2 * kv) * h + q * h + m.n_head * 4;
  // A sparse block keeps, per token, the same for each of its top_k experts (the gathered input
  // row and the expert's output besides the SwiGLU's four) and the router's fp32 logits and
  // probabilities.
  const auto& e = m.moe;
  const int64_t dense = attention + 4 * m.intermediate * h,
                sparse = attention + e.top_k * (4 * e.intermediate + 2 * C) * h + 8 * e.experts;
  const int64_t S = m.sparse_blocks();
  const int64_t block = tokens * (S > 0 ? sparse : dense);
  const int64_t all = tokens * ((L - S) * dense + S * sparse);
  // The backward of one sparse block holds, for each token's top_k slots at once, the gradients
  // of the gathered rows, of the experts' outputs in both orders and of the SwiGLU's halves
  // (measured on the CPU: without them the estimate was 14% under a qwen3-moe run's peak).
  const int64_t sparse_backward = S > 0 ? tokens * e.top_k * (3 * C + 4 * e.intermediate) * h : 0;
  const int64_t blocks = (checkpointed ? L * tokens * C * r + block : all) + sparse_backward;
  return tokens * 2 * 8 + blocks + tokens * 4 + head_bytes(d, s, tokens, C, m.vocab_size) +
         // Frozen plain Linear layers keep neither the norms' outputs as the matmuls see them
         // nor down_proj's input.
         lora_activations(d, s, tokens, checkpointed, /*plain_frozen=*/true,
                          (2 * C + m.intermediate) * h);
}

// What a Llama of `m` holds besides its inventory's Linear layers: RMSNorms (two per block and
// Qwen3's q/k norms, the final one), the embedding and an untied head; its activations as above.
FamilyTerms llama_memory_terms(const LlamaDims& m, const ModelDims& d) {
  FamilyTerms t;
  const int64_t ranks = m.expert_shard.count;  // expert parallelism: a rank holds 1/ranks of them
  const auto mlp = m.moe.active()
                       ? fmt::format("{} experts of width {} (top {}; {} parameters active{})",
                                     m.moe.experts, m.moe.intermediate, m.moe.top_k,
                                     m.active_parameters(),
                                     ranks > 1 ? fmt::format("; {} experts per rank under "
                                                             "expert parallel {}: {} parameters "
                                                             "per rank",
                                                             m.moe.experts / ranks, ranks,
                                                             m.rank_parameters())
                                               : "")
                       : fmt::format("intermediate {}", m.intermediate);
  t.description = fmt::format("{} n_layer {}, n_embd {}, n_head {}, n_kv_head {}, {}, vocab_size {}, "
                              "seq_len {}",
                              m.flavour, m.n_layer, m.n_embd, m.n_head, m.n_kv_head, mlp,
                              m.vocab_size, d.seq_len);
  t.block_norm = 2 * m.n_embd + (m.qk_norm ? 2 * m.head_dim() : 0);
  t.norm = m.n_layer * t.block_norm + m.n_embd;
  t.parameters = m.rank_parameters();
  t.other_matmul_weights = m.expert_parameters() / ranks + m.router_parameters();
  // The inventory's expert groups, each cut to this rank's share of the experts.
  for (auto stack : d.layers.expert_groups) {
    const int64_t e = stack.experts / ranks;
    stack.out = stack.out / stack.experts * e;
    stack.experts = e;
    t.stacked_weights.push_back(std::move(stack));
  }
  t.activations = [m](const ModelDims& dims, const Scheme& s, int64_t b, bool checkpointed) {
    return llama_activations(m, dims, s, b, checkpointed);
  };
  return t;
}

ModelDims llama_memory_dims(const config::Config& config, std::vector<int64_t>, int64_t seq_len) {
  const auto llama = resolve_llama_dims(config);
  ModelDims d;
  d.name = config.model;
  d.seq_len = seq_len > 0 ? seq_len : llama_window(config, llama);
  if (d.seq_len > llama.block_size) {
    throw UsageError(fmt::format("seq_len {} exceeds block_size {} of model {}", d.seq_len,
                                 llama.block_size, config.model));
  }
  d.classes = llama.vocab_size;
  d.fused_kernels = config.fused_kernels != config::AutoSwitch::off;
  d.layers = layer_inventory(llama);
  d.terms = llama_memory_terms(llama, d);
  d.terms.cache_width = 2 * llama.n_layer * llama.n_kv_head * llama.head_dim();
  return d;
}

std::string llama_load_pretrained(const config::Config& config, const hf::TensorSink& sink) {
  const auto files = hf::pretrained_files(config);
  const auto llama_config = hf::read_llama_config(files.config_json);
  int64_t count = 0;
  hf::read_llama_weights(files, llama_config,
                         declared_linears(llama_config),
                         [&](const std::string& name, const torch::Tensor& tensor) {
                           ++count;
                           sink(name, tensor);
                         });
  return fmt::format("{} ({} tensors from {} file{})", files.dir, count, files.weights.size(),
                     files.weights.size() == 1 ? "" : "s");
}

std::string llama_write_hf(const HfExport& request) {
  const auto& config = *request.config;
  const auto dims = resolve_llama_dims(config);
  // The special tokens the model was released with, which generation configs read.
  const auto released = config.init_from.empty()
                            ? hf::LlamaConfig{}
                            : hf::read_llama_config(hf::pretrained_files(config).config_json);
  const hf::LlamaConfig c{dims, released.bos_token_id, released.eos_token_ids};
  std::optional<hf::ExportTokenizer> tokenizer;
  if (request.tokenizer_path) tokenizer = hf::read_export_tokenizer(*request.tokenizer_path, c.vocab_size);
  const auto written =
      hf::write_llama_directory(request.dir, request.weights, c, declared_linears(layer_inventory(dims)),
                                tokenizer ? &*tokenizer : nullptr, request.metadata);
  return fmt::format("{}", fmt::join(written, ", "));
}

}  // namespace

ModelFamily llama_family() {
  std::vector<std::string> presets;
  for (const auto& preset : llama_presets()) {
    if (preset.name != "llama") presets.push_back(preset.name);
  }
  return {.name = "llama",
          .presets = std::move(presets),
          .sample_request = llama_request,
          .build = llama_build,
          .memory_dims = llama_memory_dims,
          .language_model = true,
          .transformer_blocks = true,
          .pretrained = true,
          .hf_export = true,
          .generation = true,
          .lora_targets = {"q_proj", "v_proj"},
          .hf_module_prefix = "model.",
          .hf_transposed = false,
          .hf_model_types = {{"llama", "llama"}, {"qwen2", "qwen2"}, {"qwen3", "qwen3"},
                             {"mistral", "mistral"}, {"qwen3_moe", "qwen3-moe"},
                             {"mixtral", "mixtral"}},
          .load_pretrained = llama_load_pretrained,
          .write_hf = llama_write_hf};
}

}  // namespace ampt::models
