// The GPT family: GPT-2's decoder-only transformer (gpt.h), its presets (gpt_presets.h), and
// Hugging Face GPT-2 checkpoints in and out.
#include "ampt/hf/gpt2_config.h"
#include "ampt/hf/gpt2_export.h"
#include "ampt/hf/gpt2_weights.h"
#include "ampt/hf/pretrained.h"
#include "ampt/kernels/gelu_mlp.h"
#include "ampt/models/family_support.h"
#include "ampt/models/flops.h"
#include "ampt/models/gpt.h"
#include "ampt/models/gpt_presets.h"
#include "ampt/models/memory_terms.h"
#include "ampt/models/model_family.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace ampt::models {
namespace {

data::SampleRequest gpt_request(const config::Config& config) {
  const auto dims = resolve_gpt_dims(config);
  return {data::SampleRequest::Form::tokens, gpt_window(config, dims), dims.real_vocab()};
}

Model gpt_build(const config::Config& config, const data::DataSpec& spec) {
  const GptDims dims = resolve_gpt_dims(config);  // the settings' own errors first
  require_data(spec.task == data::Task::language_model && spec.sample_shape.size() == 1,
               config.model, "language-model token blocks", spec);
  const int64_t tokens = spec.sample_shape[0];
  if (spec.classes > dims.real_vocab()) {
    throw UsageError(fmt::format(
        "the dataset's vocabulary of {} tokens exceeds vocab_size {} (model {}): vocab_size must "
        "be at least {}",
        spec.classes, dims.real_vocab(), config.model, spec.classes));
  }
  if (tokens > dims.block_size) {
    throw UsageError(fmt::format(
        "the dataset's blocks of {} tokens exceed block_size {} (model {}): block_size must be "
        "at least {}",
        tokens, dims.block_size, config.model, tokens));
  }
  if (config.mixed_precision == config::MixedPrecision::fp8 &&
      (dims.n_embd % 16 != 0 || config.batch_size * tokens % 16 != 0)) {
    throw UsageError(fmt::format(
        "mixed_precision fp8 needs n_embd and batch_size x tokens per sample to be multiples of "
        "16 (fp8 matmul tiles); model {} has n_embd {} and {} x {} = {}",
        config.model, dims.n_embd, config.batch_size, tokens, config.batch_size * tokens));
  }
  Gpt gpt(dims);
  gpt->set_grad_ckpt(config.grad_ckpt);
  // auto builds it fused: the run may turn the kernels off once it has measured (set_fused).
  const bool fused = config.fused_kernels != config::AutoSwitch::off;
  gpt->set_fused(fused, config.gemm_epilogues);
  auto model = decoder_model(gpt, layer_inventory(dims), tokens);
  model.flops_per_sample =
      gpt_training_flops_per_token(parameter_count(*gpt), dims, tokens) * tokens;
  model.architecture =
      fmt::format("n_layer {}, n_embd {}, n_head {}, block_size {}, vocab_size {}{}, dropout {}{}",
                  dims.n_layer, dims.n_embd, dims.n_head, dims.block_size, dims.vocab_size,
                  dims.real_vocab() < dims.vocab_size
                      ? fmt::format(" ({} tokens)", dims.real_vocab())
                      : "",
                  dims.dropout, config.grad_ckpt ? ", blocks recomputed in backward" : "");
  model.set_fused = [gpt, epilogues = config.gemm_epilogues](bool fused) mutable {
    gpt->set_fused(fused, epilogues);
  };
  return model;
}

// GPT-2 checkpoints are single files, read whole: the head's padding and Conv1D's transposes
// need their tensors together.
std::string gpt_load_pretrained(const config::Config& config, const hf::TensorSink& sink) {
  const auto files = hf::pretrained_files(config);
  const auto hf_config = hf::read_gpt2_config(files.config_json);
  const auto padded = padded_vocab(hf_config.vocab_size);
  const auto weights = hf::read_gpt2_weights(files, hf_config, declared_linears(hf_config), padded);
  for (const auto& [name, tensor] : weights) sink(name, tensor);
  return fmt::format("{} ({} tensors from {} file{}; vocabulary {} padded to {})", files.dir,
                     weights.size(), files.weights.size(), files.weights.size() == 1 ? "" : "s",
                     hf_config.vocab_size, padded);
}

std::string gpt_write_hf(const HfExport& request) {
  const GptDims dims = resolve_gpt_dims(*request.config);
  hf::Gpt2Config gpt2;
  gpt2.n_layer = dims.n_layer;
  gpt2.n_embd = dims.n_embd;
  gpt2.n_head = dims.n_head;
  gpt2.n_positions = dims.block_size;
  gpt2.vocab_size = dims.real_vocab();
  gpt2.layer_norm_epsilon = dims.layer_norm_eps;
  gpt2.activation_function = dims.tanh_gelu ? "gelu_new" : "gelu";
  std::optional<hf::ExportTokenizer> tokenizer;
  if (request.tokenizer_path) {
    tokenizer = hf::read_export_tokenizer(*request.tokenizer_path, gpt2.vocab_size);
    gpt2.bos_token_id = gpt2.eos_token_id = tokenizer->eos;
  } else {
    gpt2.bos_token_id = gpt2.eos_token_id = std::nullopt;
  }
  const auto written = hf::write_gpt2_directory(request.dir, request.weights, gpt2,
                                                declared_linears(layer_inventory(dims)),
                                                tokenizer ? &*tokenizer : nullptr, request.metadata);
  return fmt::format("{}", fmt::join(written, ", "));
}

// A GPT block's saved tensors per token and channel (measured with torch's saved-tensor hooks;
// docs/memory.md): the block input (ln_1), ln_1's output as the matmul sees it, q/k/v
// (3), the attention output (SDPA keeps it; c_proj reads the same storage), the mid-block
// residual (ln_2), ln_2's output, c_fc's output (4, kept by GELU) and GELU's output (4, kept by
// c_proj) unless the fused MLP recomputes it in backward (kernels/gelu_mlp.h: on a GPU). fp8
// Linear layers keep their e4m3 inputs (1 byte) instead: ln_1/ln_2 outputs, the attention output
// as c_proj's input (besides SDPA's bf16 copy), and GELU's output; their MLP is never the fused
// one.
int64_t gpt_block_bytes_per_token_channel(const Scheme& s, bool recomputed_gelu) {
  const auto [r, h] = widths(s);
  if (s.precision == Precision::fp8) return 2 * r + 1 + 3 * h + h + 1 + 1 + 4 * h + 4;
  return 2 * r + h + 3 * h + h + h + 4 * h + (recomputed_gelu ? 0 : 4 * h);
}

// The fused GELU MLP has no place for an adapter's update: an adapted MLP runs unfused.
bool adapts_mlp(const ModelDims& d) {
  return std::ranges::any_of(d.lora.adapted, [](const LinearLayer& l) {
    return l.role == LinearRole::fc || l.role == LinearRole::down;
  });
}

int64_t gpt_activations(const GptDims& g, const ModelDims& d, const Scheme& s, int64_t b,
                        bool checkpointed) {
  const auto [r, h] = widths(s);
  const int64_t T = d.seq_len, C = g.n_embd, L = g.n_layer;
  const int64_t tokens = b * T;
  // Per block besides the channel-wide tensors: SDPA's fp32 log-sum-exp per head and token, and
  // the two LayerNorms' fp32 mean and rstd per token.
  const bool fused_mlp = d.fused_kernels && !adapts_mlp(d);
  const bool recomputed_gelu =
      fused_mlp && !kernels::gelu_mlp_keeps_output(d.cpu ? c10::kCPU : c10::kCUDA);
  const int64_t block = tokens * C * gpt_block_bytes_per_token_channel(s, recomputed_gelu) +
                        tokens * g.n_head * 4 + tokens * 16;
  // Checkpointing keeps each block's input and recomputes one block at a time in backward.
  const int64_t blocks = checkpointed ? L * tokens * C * r + block : L * block;
  const int64_t data = tokens * 2 * 8;  // int64 inputs and targets
  const int64_t norm_stats = tokens * 8;  // ln_f's mean and rstd
  // The fused MLP's backward (kernels/gelu_mlp.h) holds, one block at a time, the gradients of
  // its GELU's output and of c_fc's output [tokens, 4C] together, with the gradient arriving
  // from c_proj and the residual stream's [tokens, C]: more than the head's transient, which is
  // gone by then. The peak is the larger of the two (measured: what a GPT LoRA run's estimate
  // lacked, 13%, and a full fine-tune's, 9%, in fp32).
  const int64_t mlp_backward =
      fused_mlp && s.precision != Precision::fp8 ? tokens * C * (8 * h + r + h) : 0;
  return data + blocks + norm_stats +
         std::max(head_bytes(d, s, tokens, C, g.vocab_size), mlp_backward) +
         lora_activations(d, s, tokens, checkpointed, /*plain_frozen=*/false, 0);
}

// What a GPT of `g` holds besides its inventory's Linear layers: LayerNorms (ln_1, ln_2 per
// block, ln_f: weight and bias), the tied wte as the head, wpe; its activations as above.
FamilyTerms gpt_memory_terms(const GptDims& g, const ModelDims& d) {
  FamilyTerms t;
  t.description = fmt::format("n_layer {}, n_embd {}, n_head {}, vocab_size {}, seq_len {}",
                              g.n_layer, g.n_embd, g.n_head, g.vocab_size, d.seq_len);
  t.block_norm = 2 * 2 * g.n_embd;
  t.norm = g.n_layer * t.block_norm + 2 * g.n_embd;
  t.parameters = linear_counts(d.layers.linears).parameters() + g.vocab_size * g.n_embd +
                 g.block_size * g.n_embd + t.norm;
  t.activations = [g](const ModelDims& dims, const Scheme& s, int64_t b, bool checkpointed) {
    return gpt_activations(g, dims, s, b, checkpointed);
  };
  return t;
}

ModelDims gpt_memory_dims(const config::Config& config, std::vector<int64_t>, int64_t seq_len) {
  const auto gpt = resolve_gpt_dims(config);
  ModelDims d;
  d.name = config.model;
  d.seq_len = seq_len > 0 ? seq_len : gpt.block_size;
  if (d.seq_len > gpt.block_size) {
    throw UsageError(fmt::format("seq_len {} exceeds block_size {} of model {}", d.seq_len,
                                 gpt.block_size, config.model));
  }
  d.classes = gpt.vocab_size;
  d.fused_kernels = config.fused_kernels != config::AutoSwitch::off;
  d.cpu = config.device == config::DeviceKind::cpu;
  d.layers = layer_inventory(gpt);
  d.terms = gpt_memory_terms(gpt, d);
  d.terms.cache_width = 2 * gpt.n_layer * gpt.n_embd;
  return d;
}

}  // namespace

ModelFamily gpt_family() {
  std::vector<std::string> presets;
  for (const auto& preset : gpt_presets()) presets.push_back(preset.name);
  return {.name = "gpt",
          .presets = std::move(presets),
          .sample_request = gpt_request,
          .build = gpt_build,
          .memory_dims = gpt_memory_dims,
          .language_model = true,
          .transformer_blocks = true,
          .pretrained = true,
          .hf_export = true,
          .generation = true,
          .lora_targets = {"c_attn"},
          .hf_module_prefix = "transformer.",
          .hf_transposed = true,
          // GPT-2's own files have carried model_type since 2020; one without it is taken for
          // GPT-2.
          .hf_model_types = {{"gpt2", "gpt"}, {"", "gpt"}},
          .load_pretrained = gpt_load_pretrained,
          .write_hf = gpt_write_hf};
}

}  // namespace ampt::models
