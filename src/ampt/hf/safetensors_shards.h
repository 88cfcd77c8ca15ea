// A model's weights as Hugging Face's save_pretrained writes them: model.safetensors, or, when
// larger than a shard may be, model-0000i-of-0000n.safetensors with model.safetensors.index.json
// mapping each tensor to its shard (what from_pretrained and ampt's --init_from read).
#pragma once

#include "ampt/core/named_tensors.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ampt::hf {

// save_pretrained's default max_shard_size, 5 GB.
constexpr int64_t kMaxShardBytes = 5'000'000'000;

// Writes `tensors` into `dir` in their order, a new shard whenever the next tensor would take the
// current one past `max_shard_bytes` (a tensor larger than that gets a shard of its own), with
// `metadata` in each header. Returns the file names written (the index last, when sharded).
// Stale shards of an earlier export are not removed: the index names the current ones.
std::vector<std::string> write_safetensors_shards(const std::string& dir, const NamedTensors& tensors,
                                                  const std::map<std::string, std::string>& metadata,
                                                  int64_t max_shard_bytes = kMaxShardBytes);

}  // namespace ampt::hf
