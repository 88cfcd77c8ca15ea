// The optimizer of a ZeRO run: the fused AdamW (or SGD) over this rank's pieces of the
// parameters, its state in flat buffers laid out as the master shard, so that a checkpoint
// writes them as they are and a loader re-cuts them like the weights.
#pragma once

#include "ampt/config/config.h"
#include "ampt/core/named_tensors.h"
#include "ampt/distributed/zero_shards.h"
#include "ampt/train/optimizer.h"

#include <memory>
#include <string>
#include <vector>

namespace ampt::train {

struct ZeroOptimizer {
  std::unique_ptr<Optimizer> optimizer;
  // Each state kind as one flat fp32 tensor: a per-element kind (exp_avg) shard_numel() long,
  // a per-piece kind (AdamW's step) one value per piece, in pieces() order.
  NamedTensors state;
  std::vector<StateKind> kinds;
  // The state of the whole parameters stepped beside the shard, named "<parameter>.<kind>".
  NamedTensors whole_state;
  int64_t bytes() const;  // of the flat state
};

// `names`: every parameter's (FlatUnit::params index them), `decay`: whether weight decay
// applies to it. Each piece steps with its master piece's gradient, a view of the gradient shard.
// `whole`: parameters outside the shards (the experts that expert parallelism divides among
// ranks), stepped whole with their own gradients and state in the same optimizer.
ZeroOptimizer make_zero_optimizer(const config::Config& config, distributed::ZeroShards& shards,
                                  const std::vector<std::string>& names,
                                  const std::vector<bool>& decay, const NamedTensors& whole = {});

}  // namespace ampt::train
