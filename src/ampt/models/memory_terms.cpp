#include "ampt/models/memory_terms.h"

#include "ampt/kernels/fused_classifier.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <set>
#include <string>

namespace ampt::models {

Widths widths(const Scheme& s) {
  if (s.precision == Precision::fp32) return {4, 4};
  return {s.opt_level == config::OptLevel::O2 ? 2 : 4, 2};
}

int64_t product(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

int64_t head_bytes(const ModelDims& d, const Scheme& s, int64_t tokens, int64_t C, int64_t V) {
  const auto [r, h] = widths(s);
  if (!d.fused_kernels) return tokens * C * (r + h) + tokens * V * kLossBytesPerLogit;
  const int64_t chunk_rows = std::min(tokens, kernels::default_chunk_rows(V));
  const int64_t weight = d.lora.active() ? 0 : 8 * V * C;
  return tokens * C * (r + 4 + h) + weight + chunk_rows * V * 4;
}

int64_t lora_activations(const ModelDims& d, const Scheme& s, int64_t tokens, bool checkpointed,
                         bool plain_frozen, int64_t frozen_inputs) {
  if (!d.lora.active()) return 0;
  const auto [r, h] = widths(s);
  const auto blocks = static_cast<int64_t>(d.layers.blocks.size());
  int64_t bytes = plain_frozen ? -blocks * tokens * frozen_inputs : 0;
  std::set<std::string> kept;  // the inputs an adapter already keeps: module path, norm or not
  for (const auto& layer : d.lora.adapted) {
    if (layer.experts > 1) {
      // An expert group's adapter is added to the weights: the sum, the size of the whole stack,
      // is what its GEMMs keep for backward.
      bytes += layer.in * layer.out * h;
      continue;
    }
    bytes += tokens * d.lora.rank * h;
    const auto input =
        layer.name.substr(0, layer.name.rfind('.')) + (layer.reads_norm() ? "+norm" : "");
    if (d.lora.dropout > 0.0) {
      bytes += tokens * layer.in * (h + 1);
    } else if (plain_frozen && layer.reads_norm() && r > h) {
      bytes += tokens * layer.in * h;
    } else if (plain_frozen && kept.insert(input).second) {
      bytes += tokens * layer.in * h;
    }
  }
  return checkpointed ? bytes / blocks : bytes;
}

}  // namespace ampt::models
