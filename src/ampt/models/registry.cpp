#include "ampt/models/registry.h"

#include "ampt/config/dataset_spec.h"
#include "ampt/core/errors.h"
#include "ampt/models/cnn.h"
#include "ampt/models/flops.h"
#include "ampt/models/gpt.h"
#include "ampt/models/gpt_presets.h"
#include "ampt/models/mlp.h"

#include <fmt/format.h>
#include <torch/nn/functional/loss.h>
#include <fmt/ranges.h>

#include <functional>
#include <numeric>

namespace ampt::models {

namespace {

std::string describe(const data::DataSpec& spec) {
  return fmt::format("{} samples of shape {{{}}}",
                     spec.task == data::Task::language_model ? "language-model" : "classification",
                     fmt::join(spec.sample_shape, ", "));
}

// Throws the UsageError that says `model` needs `what` unless `accepted`.
void require(bool accepted, const std::string& model, std::string_view what,
             const data::DataSpec& spec) {
  if (!accepted) {
    throw UsageError(
        fmt::format("model {} needs {}; the dataset gives {}", model, what, describe(spec)));
  }
}

template <class Holder>
std::function<torch::Tensor(const torch::Tensor&)> forward_of(Holder holder) {
  return [holder](const torch::Tensor& x) mutable { return holder->forward(x); };
}

// A classifier's loss: cross_entropy of its [B, classes] logits.
template <class Holder>
std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)> loss_of(Holder holder) {
  return [holder](const torch::Tensor& x, const torch::Tensor& y) mutable {
    return torch::nn::functional::cross_entropy(holder->forward(x), y);
  };
}

Model make_mlp(const config::Config& config, const data::DataSpec& spec) {
  require(spec.task == data::Task::classification && !spec.sample_shape.empty(), "mlp",
          "classification samples", spec);
  const int64_t features = std::accumulate(spec.sample_shape.begin(), spec.sample_shape.end(),
                                           int64_t{1}, std::multiplies<>());
  Mlp mlp(features, config.mlp_hidden, config.mlp_layers, spec.classes);
  return {mlp.ptr(), forward_of(mlp), loss_of(mlp), training_flops_from_macs(mlp->macs_per_sample()), 1,
          fmt::format("in {}, hidden {} x {} layers, classes {}", features, config.mlp_hidden,
                      config.mlp_layers, spec.classes),
          {}, {}};
}

Model make_cnn(const config::Config& config, const data::DataSpec& spec) {
  require(spec.task == data::Task::classification && spec.sample_shape.size() == 3, "cnn",
          "classification images of shape {channels, height, width}", spec);
  const auto& shape = spec.sample_shape;
  Cnn cnn(shape[0], shape[1], shape[2], config.cnn_channels, config.cnn_blocks, spec.classes);
  return {
      cnn.ptr(), forward_of(cnn), loss_of(cnn), training_flops_from_macs(cnn->macs_per_sample()), 1,
      fmt::format("input {}x{}x{}, {} stages of {} blocks, channels {}..{}, classes {}", shape[0],
                  shape[1], shape[2], CnnImpl::kStages, config.cnn_blocks, config.cnn_channels,
                  config.cnn_channels << (CnnImpl::kStages - 1), spec.classes),
      {}, {}};
}

Model make_gpt(const config::Config& config, const data::DataSpec& spec) {
  const GptDims dims = resolve_gpt_dims(config);  // the settings' own errors first
  require(spec.task == data::Task::language_model && spec.sample_shape.size() == 1, config.model,
          "language-model token blocks", spec);
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
  gpt->set_fused(config.fused_kernels, config.gemm_epilogues);
  return {gpt.ptr(), forward_of(gpt),
          [gpt](const torch::Tensor& x, const torch::Tensor& y) mutable { return gpt->loss(x, y); },
          gpt_training_flops_per_token(parameter_count(*gpt), dims, tokens) * tokens, tokens,
          fmt::format("n_layer {}, n_embd {}, n_head {}, block_size {}, vocab_size {}{}, dropout {}{}",
                      dims.n_layer, dims.n_embd, dims.n_head, dims.block_size, dims.vocab_size,
                      dims.real_vocab() < dims.vocab_size
                          ? fmt::format(" ({} tokens)", dims.real_vocab())
                          : "",
                      dims.dropout, config.grad_ckpt ? ", blocks recomputed in backward" : ""),
          gpt->fp8_candidates(),
          [gpt](const precision::Fp8Recipe& recipe, const precision::Fp8Selected& selected) mutable {
            gpt->enable_fp8(recipe, selected);
          }};
}

// grad_ckpt and fp8 act on transformer blocks and their Linear layers: other models have none.
void require_transformer(const config::Config& config) {
  if (config.grad_ckpt) {
    throw UsageError(fmt::format("grad_ckpt recomputes transformer blocks and model {} has none: "
                                 "use a gpt model or drop --grad_ckpt",
                                 config.model));
  }
  if (config.mixed_precision == config::MixedPrecision::fp8) {
    throw UsageError(fmt::format("mixed_precision fp8 runs a GPT's Linear layers in fp8 and model "
                                 "{} is not a GPT: use a gpt model, or bf16",
                                 config.model));
  }
}

[[noreturn]] void unknown_model(const std::string& model) {
  std::vector<std::string> names = {"mlp", "cnn", "gpt"};
  for (const auto& preset : gpt_presets()) names.push_back(preset.name);
  throw UsageError(
      fmt::format("unknown model '{}': expected one of {}", model, fmt::join(names, ", ")));
}

}  // namespace

data::SampleRequest sample_request(const config::Config& config) {
  using Form = data::SampleRequest::Form;
  if (is_gpt(config.model)) {
    const auto dims = resolve_gpt_dims(config);
    return {Form::tokens, gpt_window(config, dims), dims.real_vocab()};
  }
  if (config.model != "mlp" && config.model != "cnn") unknown_model(config.model);
  const auto dataset = config::parse_dataset_spec(config.dataset);
  if (dataset && (dataset->kind == config::DatasetKind::text ||
                  dataset->kind == config::DatasetKind::tokens)) {
    std::vector<std::string> gpts = {"gpt"};
    for (const auto& preset : gpt_presets()) gpts.push_back(preset.name);
    throw UsageError(fmt::format("dataset '{}' is language-model data but model {} is not a GPT: "
                                 "use --model {}",
                                 config.dataset, config.model, fmt::join(gpts, ", ")));
  }
  return {config.model == "mlp" ? Form::features : Form::images, 0, 0};
}

Model make_model(const config::Config& config, const data::DataSpec& spec) {
  if (is_gpt(config.model)) return make_gpt(config, spec);
  if (config.model == "mlp" || config.model == "cnn") require_transformer(config);
  if (config.model == "mlp") return make_mlp(config, spec);
  if (config.model == "cnn") return make_cnn(config, spec);
  unknown_model(config.model);
}

int64_t parameter_count(const torch::nn::Module& module) {
  int64_t count = 0;
  for (const auto& p : module.parameters()) count += p.numel();
  return count;
}

}  // namespace ampt::models
