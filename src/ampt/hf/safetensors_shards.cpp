#include "ampt/hf/safetensors_shards.h"

#include "ampt/checkpoint/atomic_file.h"
#include "ampt/checkpoint/safetensors.h"
#include "ampt/core/json_text.h"

#include <fmt/format.h>

namespace ampt::hf {

std::vector<std::string> write_safetensors_shards(const std::string& dir, const NamedTensors& tensors,
                                                  const std::map<std::string, std::string>& metadata,
                                                  int64_t max_shard_bytes) {
  std::vector<NamedTensors> shards(1);
  int64_t shard_bytes = 0, total = 0;
  for (const auto& entry : tensors) {
    const int64_t bytes = entry.second.numel() * entry.second.element_size();
    if (!shards.back().empty() && shard_bytes + bytes > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(entry);
    shard_bytes += bytes;
    total += bytes;
  }
  if (shards.size() == 1) {
    checkpoint::write_safetensors(dir + "/model.safetensors", tensors, metadata);
    return {"model.safetensors"};
  }
  std::vector<std::string> names;
  std::string weight_map;
  for (std::size_t i = 0; i < shards.size(); ++i) {
    names.push_back(fmt::format("model-{:05}-of-{:05}.safetensors", i + 1, shards.size()));
    checkpoint::write_safetensors(dir + "/" + names.back(), shards[i], metadata);
    for (const auto& [name, tensor] : shards[i]) {
      weight_map += fmt::format("{}    {}: {}", weight_map.empty() ? "" : ",\n", json_string(name),
                                json_string(names.back()));
    }
  }
  checkpoint::write_file_atomically(
      dir + "/model.safetensors.index.json",
      fmt::format("{{\n  \"metadata\": {{\"total_size\": {}}},\n  \"weight_map\": {{\n{}\n  }}\n}}\n",
                  total, weight_map));
  names.push_back("model.safetensors.index.json");
  return names;
}

}  // namespace ampt::hf
