#include "ampt/train/base_fingerprint.h"

#include "ampt/config/describe.h"
#include "ampt/config/enum_names.h"
#include "ampt/core/errors.h"
#include "ampt/core/fnv1a.h"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <map>

namespace ampt::train {
namespace {

// xxHash64's round over 8-byte words: a byte-wise hash would take tens of seconds on an 8B base.
uint64_t mix(uint64_t state, uint64_t word) {
  constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ULL;
  constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4FULL;
  state += word * kPrime2;
  state = (state << 31) | (state >> 33);
  return state * kPrime1;
}

uint64_t hash_values(const torch::Tensor& tensor) {
  const auto host = tensor.detach().to(torch::kCPU, torch::kFloat).contiguous();
  const auto* bytes = static_cast<const unsigned char*>(host.data_ptr());
  const size_t size = host.numel() * sizeof(float);
  uint64_t state = 0;
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t word;
    std::memcpy(&word, bytes + i, 8);
    state = mix(state, word);
  }
  uint64_t tail = 0;
  std::memcpy(&tail, bytes + i, size - i);
  return mix(state, tail);
}

}  // namespace

TensorDigest tensor_digest(const torch::Tensor& tensor) {
  return {tensor.sizes().vec(), hash_values(tensor)};
}

std::string base_fingerprint(const NamedTensors& frozen,
                             const std::map<std::string, TensorDigest>& digested) {
  // By name: the model's order and a checkpoint file's need not agree.
  std::map<std::string, torch::Tensor> sorted(frozen.begin(), frozen.end());
  Fnv1a hash;
  for (const auto& [name, tensor] : sorted) {
    const auto it = digested.find(name);
    const auto digest = it != digested.end() ? it->second : tensor_digest(tensor);
    hash.add_field(name);
    for (const auto size : digest.sizes) hash.add_int(size);
    hash.add_int(digest.values);
  }
  return fmt::format("{:016x}", hash.digest());
}

void require_same_base(const std::string& path, const checkpoint::Checkpoint& saved,
                       const std::string& init_from, const std::string& fingerprint,
                       config::BaseDtype base_dtype) {
  if (saved.base_fingerprint == fingerprint) {
    if (fingerprint.empty()) return;
    // The run's own record: --base_dtype=X among what it set, else its default.
    std::string saved_dtype(config::to_string(config::BaseDtype::auto_select));
    for (const auto& flag : config::described_flags(saved.config)) {
      if (flag.starts_with("--base_dtype=")) saved_dtype = flag.substr(13);
    }
    if (saved_dtype == config::to_string(base_dtype)) return;
    throw RuntimeError(fmt::format(
        "checkpoint '{}' holds LoRA adapters trained over its base stored as base_dtype {}, and "
        "this run has base_dtype {}: resume with --base_dtype {} (export the adapters to move "
        "them to another storage)",
        path, saved_dtype, config::to_string(base_dtype), saved_dtype));
  }
  const auto base = [](const std::string& model) {
    return model.empty() ? std::string("a random base") : "base '" + model + "'";
  };
  if (fingerprint.empty()) {
    throw RuntimeError(fmt::format("checkpoint '{}' holds LoRA adapters trained on {}: load it with its "
                       "--lora_rank and --init_from",
                       path, base(saved.base_model)));
  }
  if (saved.base_fingerprint.empty()) {
    throw RuntimeError(fmt::format("checkpoint '{}' holds a full model, not LoRA adapters: load it with "
                       "lora_rank 0",
                       path));
  }
  throw RuntimeError(fmt::format("checkpoint '{}' holds LoRA adapters trained on {} (fingerprint {}), and "
                     "this run's {} has fingerprint {}: load them onto the same base",
                     path, base(saved.base_model), saved.base_fingerprint, base(init_from),
                     fingerprint));
}

}  // namespace ampt::train
