// Saving a ZeRO run: every rank writes its own shard, and no rank gathers the whole state.
#pragma once

#include "ampt/checkpoint/checkpoint.h"
#include "ampt/checkpoint/manifest.h"

#include <functional>
#include <string>
#include <vector>

namespace ampt::checkpoint {

// What one rank saves.
struct ShardedSave {
  // Everything but the parameters and the optimizer state, the same on every rank: the scalars,
  // the RNG states and (in meta.model) the model's buffers. Rank 0 writes it.
  Checkpoint meta;
  ShardedLayout layout;
  int64_t rank = 0;
  // This rank's flat tensors, named as layout.per_element and layout.per_piece say.
  NamedTensors shard;
};

// Takes this rank's report and returns every rank's in rank order on rank 0, nothing on the
// others: DataParallel::gather_text.
using GatherReports = std::function<std::vector<std::string>(const std::string& report)>;

// Writes <directory>/ckpt-<step>/rank-<rank>.pt (rank 0 also common.pt: `meta` as an ordinary
// checkpoint file, its own checksum included), each atomically, and
// reports its records' checksums through `gather`; a rank whose write fails reports the error
// before throwing it. Rank 0 then writes manifest.json, and only then the `latest` pointer, so
// a checkpoint is found only once every shard is on disk, and deletes the oldest checkpoints
// beyond `keep`. Returns the checkpoint's directory. Safe on a background thread while training
// goes on, given tensors no step writes to.
std::string save_sharded(const std::string& directory, const ShardedSave& save, int64_t keep,
                         const GatherReports& gather);

}  // namespace ampt::checkpoint
