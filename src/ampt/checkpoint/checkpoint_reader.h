// A checkpoint read a range at a time, ordinary or sharded and of any world size: a ZeRO rank
// takes only its pieces of the weights and the optimizer state, re-cut for its own world size.
#pragma once

#include "ampt/checkpoint/checkpoint.h"
#include "ampt/checkpoint/manifest.h"

#include <torch/types.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ampt::checkpoint {

class CheckpointReader {
 public:
  // A checkpoint file, a sharded checkpoint's directory, a run directory or its `latest` file.
  // Reads and checks the metadata; a sharded checkpoint's shard files are mapped when first read.
  explicit CheckpointReader(const std::string& path);

  const std::string& path() const { return path_; }
  // Everything a checkpoint holds besides the parameters and the optimizer state, with the
  // model's buffers in meta().model (an ordinary checkpoint: the whole of it).
  const Checkpoint& meta() const { return meta_; }

  // The shape of parameter `name` or optimizer state "<parameter>.<state>"; nullopt when the
  // checkpoint has no such tensor.
  std::optional<std::vector<int64_t>> shape(const std::string& name) const;
  // Elements [begin, begin + count) of `name`, flattened, copied into `out` (count elements, any
  // dtype or device). A sharded checkpoint's records are checked against the manifest's
  // checksums when first read: a RuntimeError names the file and the record.
  void read(const std::string& name, int64_t begin, int64_t count, const torch::Tensor& out);

  // The whole checkpoint, parameters and optimizer state assembled (export, a resume without
  // ZeRO). For an ordinary checkpoint, what load_file gives.
  Checkpoint assemble();

 private:
  struct Located {
    int64_t param = -1;  // index in the manifest's parameters
    std::string kind;    // "master", or a state kind
    bool per_piece = false;
  };
  std::optional<Located> locate(const std::string& name) const;
  // Rank `rank`'s record `kind`, checked.
  const torch::Tensor& record(int64_t rank, const std::string& kind);
  int64_t piece_index(int64_t rank, int64_t shard_offset);

  std::string path_;
  Checkpoint meta_;
  // Ordinary checkpoints: every tensor by name.
  std::map<std::string, torch::Tensor> whole_;
  // Sharded ones.
  std::optional<Manifest> manifest_;
  std::map<std::string, int64_t> param_index_;
  std::map<int64_t, std::map<std::string, torch::Tensor>> shards_;  // rank -> kind -> record
  std::set<std::pair<int64_t, std::string>> checked_;
  std::map<int64_t, std::vector<int64_t>> piece_offsets_;  // rank -> its pieces' shard offsets
};

}  // namespace ampt::checkpoint
