// The manifest of a sharded (ZeRO) checkpoint, manifest.json beside the shards: the flat layout
// the shards were cut by and a checksum for every record of every shard, so that a loader can
// read any range and check what it read. The rest of the run's state is in common.pt, an
// ordinary checkpoint file without parameters or optimizer state.
#pragma once

#include "ampt/core/flat_layout.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ampt::checkpoint {

inline constexpr const char* kManifestName = "manifest.json";
inline constexpr const char* kCommonFile = "common.pt";
// The "format" of a shard file's root dictionary.
inline constexpr const char* kShardFormat = "ampt-checkpoint-shard";

// How a ZeRO run's state is cut; the same on every rank.
struct ShardedLayout {
  std::vector<std::string> names;               // parameter names, by FlatUnit::params index
  std::vector<std::vector<int64_t>> shapes;     // their shapes
  FlatLayout layout;
  // The flat tensors of every shard: "master" (the fp32 weights) and the optimizer's state
  // kinds. Per element: layout.shard_numel() long, element i of the shard's flat order. Per
  // piece (AdamW's step): one value per piece of FlatLayout::segments(rank), in that order.
  std::vector<std::string> per_element;
  std::vector<std::string> per_piece;
};

// One rank's shard file and the CRC-32 of each of its records (tensors), by name.
struct ManifestFile {
  std::string file;
  std::map<std::string, uint32_t> records;
};

struct Manifest {
  int64_t step = 0;
  ShardedLayout layout;
  std::vector<ManifestFile> shards;  // one per rank; the world size is their count
};

std::string manifest_json(const Manifest& manifest);
// RuntimeError naming `path` and what is wrong when the text is no valid manifest.
Manifest parse_manifest(std::string_view text, const std::string& path);

}  // namespace ampt::checkpoint
