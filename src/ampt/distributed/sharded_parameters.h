// ZeRO-3's parameters (FSDP2's fully_shard per block): between uses a block's parameters exist
// only as this rank's slices of the flat fp32 master shard (ZeroShards). Just before the block
// computes, it is all-gathered, in the dtype it computes in, into flat storage that its
// parameters are views of; the storage is freed when the block is done, so a rank holds whole
// weights only for the blocks in use. The parameters keep their identity (autograd, the
// optimizer's names, the model's modules) and their shapes throughout: only their storage comes
// and goes, as FSDP2 resizes a parameter's storage to zero.
#pragma once

#include "ampt/core/flat_layout.h"

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <c10/util/intrusive_ptr.h>

#include <cstdint>
#include <mutex>
#include <vector>

namespace c10d {
class Work;
}

namespace ampt::distributed {

class Group;
class ZeroShards;

// Where each parameter belongs, in the run's parameter order.
struct ParameterBlocks {
  // Its block, in the order the forward runs them; -1: outside every block (embeddings, the
  // final norm, the head), the root, which stays gathered for a whole step.
  std::vector<int64_t> block;
  // The dtype it is gathered and computed in.
  std::vector<c10::ScalarType> dtype;
  // Whether that dtype is the run's compute dtype (it then changes with a precision stage);
  // false: a dtype of its own (an fp32 norm, an island, an embedding under O1).
  std::vector<bool> follows_compute;
  int64_t count = 0;  // blocks
};

// ZeRO-3's flat units: each block's parameters, one unit per gather dtype, blocks from the last
// to the first (the order backward finishes them), then the root's. Every rank computes the
// same units, and checkpoint shards are re-cut from them like stage 1 and 2's.
std::vector<FlatUnit> plan_block_units(const std::vector<at::Tensor>& parameters,
                                       const ParameterBlocks& blocks);

// A LoRA run's frozen tensors (its base's dense frozen parameters, and a quantized base's
// storage), each with its block (-1: the root). Each block's are one more unit of that block,
// all-gathered as bytes, whatever their dtypes: this rank keeps only its slice of them.
struct FrozenTensors {
  std::vector<at::Tensor> tensors;
  std::vector<int64_t> block;
};

class ShardedParameters {
 public:
  // `shards` holds the master slices already (its layout from plan_block_units(blocks)).
  // Points every parameter at its unit's flat storage, which holds nothing until gathered;
  // `frozen`'s tensors likewise, after this rank has kept its slice of their bytes.
  ShardedParameters(Group& group, ZeroShards& shards, std::vector<at::Tensor> parameters,
                    const ParameterBlocks& blocks, const FrozenTensors& frozen = {});
  ~ShardedParameters();
  ShardedParameters(const ShardedParameters&) = delete;
  ShardedParameters& operator=(const ShardedParameters&) = delete;

  int64_t blocks() const { return blocks_; }
  int64_t root() const { return blocks_; }  // the root's index in the calls below

  // Starts block b's all-gather unless its units are in flight or gathered already.
  void prefetch(int64_t block);
  // Block b whole in every parameter: waits for its all-gather, starting it if need be.
  void gather(int64_t block);
  // Frees block b's storage.
  void release(int64_t block);
  // Frees unit u's storage unless it is the root's: the gradient sync calls it once the unit's
  // gradients are copied out, when backward no longer reads its weights.
  void release_unit(std::size_t unit);
  // Frees block b's frozen units: backward has gone below it (the gradient sync frees its
  // trained units when their gradients are out, which may come before the frozen weights'
  // last use).
  void release_frozen(int64_t block);
  // Everything released: between steps, and after an evaluation.
  void release_all();

  // A precision stage's compute dtype: the units that follow it are gathered in it from now
  // on. Call it between steps, everything released.
  void set_compute_dtype(c10::ScalarType dtype);

  // Bytes of the frozen tensors this rank keeps between gathers (its slices).
  int64_t frozen_shard_bytes() const;
  // Bytes of gathered storage now, and the most at once so far.
  int64_t gathered_bytes() const;
  int64_t peak_gathered_bytes() const;
  // Bytes block b occupies when gathered (padding included).
  int64_t block_bytes(int64_t block) const;

 private:
  enum class State { released, in_flight, gathered };
  struct Unit {
    at::Tensor flat;  // the unit padded, in its dtype; the parameters are views of it
    bool follows_compute = false;
    State state = State::released;
    at::Tensor input;  // this rank's slice, cast, while the all-gather reads it
    c10::intrusive_ptr<c10d::Work> work;
    // A frozen unit: its tensors, their byte offsets in `flat` (bytes), and this rank's slice.
    std::vector<at::Tensor> frozen;
    std::vector<int64_t> offsets;
    at::Tensor shard;
  };
  // Appends block b's frozen unit (b -1: the root's), when it has frozen tensors.
  void add_frozen_unit(const FrozenTensors& frozen, int64_t block);
  void point_parameters(std::size_t unit);
  void start_locked(std::size_t unit);
  void wait_locked(std::size_t unit);
  void free_locked(std::size_t unit);

  Group& group_;
  ZeroShards& shards_;
  std::vector<at::Tensor> parameters_;
  int64_t blocks_;
  std::vector<Unit> units_;
  std::vector<std::vector<std::size_t>> units_of_block_;  // root last
  std::vector<bool> root_unit_;
  std::vector<std::vector<std::size_t>> frozen_of_block_;  // root last
  int64_t gathered_ = 0;
  int64_t peak_ = 0;
  mutable std::mutex mutex_;  // the forward's thread and autograd's both gather and release
};

}  // namespace ampt::distributed
