// The manifest of a sharded (ZeRO) checkpoint, manifest.json beside the shards: the run's state
// that is no tensor, the flat layout the shards were cut by, and a checksum for every record of
// every file, so that a loader can read any range and check what it read.
#pragma once

#include "ampt/checkpoint/checkpoint.h"
#include "ampt/core/flat_layout.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ampt::checkpoint {

inline constexpr const char* kManifestName = "manifest.json";
// The "format" of a shard file's root dictionary, and of the common file's (rank 0's).
inline constexpr const char* kShardFormat = "ampt-checkpoint-shard";
inline constexpr const char* kCommonFormat = "ampt-checkpoint-common";

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

// One file of the checkpoint and the CRC-32 of each of its records (tensors), by name.
struct ManifestFile {
  std::string file;
  std::map<std::string, uint32_t> records;
};

struct Manifest {
  Checkpoint meta;  // the scalars only: no tensors
  ShardedLayout layout;
  std::vector<ManifestFile> shards;  // one per rank; the world size is their count
  ManifestFile common;               // rank 0's: buffers and RNG states
};

std::string manifest_json(const Manifest& manifest);
// RuntimeError naming `path` and what is wrong when the text is no valid manifest.
Manifest parse_manifest(std::string_view text, const std::string& path);

}  // namespace ampt::checkpoint
