#include "ampt/models/compat_report.h"

#include "ampt/models/cnn.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <map>
#include <set>

namespace ampt::models {
namespace {

// An embedding this large gets few updates per row and sums many occurrences into the frequent
// ones: its gradient rows are where a half dtype's 8 (bf16) or 11 (fp16) bits of mantissa show.
constexpr int64_t kLargeVocabulary = 8192;

// "a, b, c and 5 more"
std::string some(const std::vector<std::string>& names, std::size_t shown = 4) {
  if (names.size() <= shown) return fmt::format("{}", fmt::join(names, ", "));
  return fmt::format("{} and {} more",
                     fmt::join(std::vector(names.begin(), names.begin() + shown), ", "),
                     names.size() - shown);
}

bool is_batch_norm(const torch::nn::Module& m) {
  return m.as<torch::nn::BatchNorm1d>() || m.as<torch::nn::BatchNorm2d>() ||
         m.as<torch::nn::BatchNorm3d>();
}

}  // namespace

bool wants_compat_report(const std::vector<precision::PrecisionPolicy>& stages) {
  for (const auto& policy : stages) {
    if (policy.loss_scaling || policy.weight_dtype != c10::kFloat) return true;
  }
  return false;
}

std::vector<std::string> compat_report(const Model& model,
                                       const precision::PrecisionIslands& islands,
                                       const precision::PrecisionPolicy& policy) {
  const auto& root = *model.module;
  const auto& layers = model.layers;
  const bool fp16 = policy.compute_dtype == c10::kHalf;
  const std::string half = fp16 ? "fp16" : "bf16";
  const bool o2 = policy.weight_dtype != c10::kFloat;
  std::vector<std::string> lines;

  // Which modules stay fp32, grouped by reason.
  std::map<std::string, std::vector<std::string>> by_reason;
  for (const auto& island : islands.list()) by_reason[island.reason].push_back(island.name);
  const auto module_count = root.named_modules("", /*include_self=*/false).size();
  if (by_reason.empty()) {
    lines.push_back(fmt::format("fp32 modules: none of {}", module_count));
  } else {
    std::vector<std::string> groups;
    for (const auto& [reason, names] : by_reason) {
      groups.push_back(fmt::format("{} ({})", some(names), reason));
    }
    lines.push_back(fmt::format("fp32 modules: {} of {}: {}", islands.list().size(), module_count,
                                fmt::join(groups, "; ")));
  }

  // Risky operations, by what the module tree holds. A block's attention is the module that holds
  // its query projection.
  std::set<std::string> attention_modules;
  for (const auto& linear : layers.linears) {
    if (linear.role == LinearRole::qkv || linear.role == LinearRole::q) {
      attention_modules.insert(linear.name.substr(0, linear.name.rfind('.')));
    }
  }
  std::vector<std::string> batch_norms;
  std::vector<std::string> attention;
  for (const auto& item : root.named_modules("", /*include_self=*/false)) {
    const auto& name = item.key();
    const auto& module = *item.value();
    const bool fp32 = islands.find(&module) != nullptr;
    if (const auto* e = module.as<torch::nn::Embedding>(); e && !fp32) {
      const auto rows = e->weight.size(0);
      if (rows >= kLargeVocabulary) {
        lines.push_back(fmt::format(
            "risky: embedding '{}' has {} rows: its gradient rows sum every occurrence of a "
            "token{}; keep_fp32_modules={} keeps it in fp32",
            name, rows, o2 ? fmt::format(" in {}", half) : "", name));
      }
    }
    if (is_batch_norm(module)) batch_norms.push_back(name);
    if (attention_modules.contains(name) && !fp32) attention.push_back(name);
  }
  if (!batch_norms.empty()) {
    lines.push_back(fmt::format(
        "{}: BatchNorm statistics of {} ({} layers): {}", o2 ? "kept fp32" : "risky",
        some(batch_norms), batch_norms.size(),
        o2 ? "computed and stored in fp32 (O2 norm islands)"
           : fmt::format("means and variances of {} activations, accumulated in fp32 by the "
                         "kernels; running statistics stay fp32",
                         half)));
  }
  if (!attention.empty()) {
    lines.push_back(fmt::format(
        "risky: attention softmax in {} ({}): scaled_dot_product_attention takes {} scores; "
        "the fused kernels accumulate in fp32, the math fallback (CPU) exponentiates in {}",
        half, some(attention, 2), half, half));
  }
  if (layers.transformer()) {
    if (o2) {
      lines.push_back(fmt::format(
          "risky: residual stream in {}: {} attention and MLP branches are added into one {} "
          "tensor of width {}",
          half, 2 * layers.blocks.size(), half, layers.head_in));
    }
    lines.push_back(fmt::format(
        "loss: log_softmax and cross-entropy over {} logits run in fp32 (autocast's fp32 list){}",
        layers.head_out, fp16 ? "; the head's logits themselves are fp16 and overflow past 65504" : ""));
  } else {
    if (root.as<models::Cnn>()) {
      lines.push_back(fmt::format(
          "risky: global average pool: a mean over every spatial position of each {}channel",
          o2 ? half + " " : ""));
    }
    lines.push_back("loss: log_softmax and cross-entropy run in fp32 (autocast's fp32 list)");
  }
  if (fp16) {
    lines.push_back("fp16: activations past 65504 become inf in the forward pass; the loss "
                    "scaler only guards the gradients (bf16 has fp32's range)");
  }
  return lines;
}

}  // namespace ampt::models
