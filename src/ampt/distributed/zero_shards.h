// One rank's part of a ZeRO stage 1, 2 or 3 run: its shard of the fp32 master weights and of the
// gradients, laid out flat by the gradient buckets (FlatLayout); the gradients it steps with,
// their global per-parameter norms, and the all-gather that puts the stepped weights back into
// every rank's model.
#pragma once

#include "ampt/core/flat_layout.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace ampt::distributed {

class Group;

class ZeroShards {
 public:
  // `parameters`: the model's, in registration order (FlatUnit::params index them);
  // `masters`: their fp32 values (O2's masters; the parameters themselves below O2), of which
  // this rank copies its slices. Every rank must already hold the same values.
  ZeroShards(Group& group, int64_t stage, const std::vector<at::Tensor>& parameters,
             const std::vector<at::Tensor>& masters, FlatLayout layout);

  int64_t stage() const { return stage_; }
  const FlatLayout& layout() const { return layout_; }
  // This rank's pieces of parameters (FlatLayout::segments), in shard order.
  const std::vector<ShardPiece>& pieces() const { return pieces_; }
  // Flat fp32 buffers of layout().shard_numel() elements, and a view of each per piece.
  const at::Tensor& master_shard() const { return master_; }
  const std::vector<at::Tensor>& master_pieces() const { return master_pieces_; }
  const std::vector<at::Tensor>& grad_pieces() const { return grad_pieces_; }
  // Stage 2: where each bucket's reduce-scatter leaves this rank's slice (views of the gradient
  // shard, one per unit).
  std::vector<at::Tensor> unit_grad_slices() const;
  // The parameters in the layout, ascending: the order of grad_norms()'s entries.
  const std::vector<int64_t>& sharded_parameters() const { return sharded_; }

  // After the gradient sync: stage 1 copies this rank's slices of the averaged gradients into
  // the gradient shard (stage 2's reduce-scatter wrote them there already); then every
  // parameter's full gradient is released. Returns grad_pieces().
  const std::vector<at::Tensor>& collect_grads();
  // The L2 norm of each sharded parameter's whole gradient, from every rank's pieces (one
  // all-reduce of a value per parameter): what one process would compute, whichever rank holds
  // the non-finite piece. 1-dim float32, in sharded_parameters() order.
  at::Tensor grad_norms(const std::vector<at::Tensor>& grads);
  // `value` := its sum over ranks.
  void sum(at::Tensor& value, const char* what);
  // Every rank's stepped master slices into every rank's parameters, in the parameters' dtype:
  // one all-gather per unit, two in flight at a time, so that only two units' buffers exist.
  // Nothing at stage 3, which gathers a block only when it computes.
  void gather_weights();

  // Bytes this rank holds for ZeRO's fp32 master and gradient shards.
  int64_t bytes() const;

 private:
  Group& group_;
  int64_t stage_;
  std::vector<at::Tensor> parameters_;
  FlatLayout layout_;
  std::vector<ShardPiece> pieces_;
  std::vector<int64_t> sharded_;
  at::Tensor piece_position_;  // each piece's index in sharded_ (int64, on the device)
  at::Tensor master_;
  at::Tensor grad_;
  std::vector<at::Tensor> master_pieces_;
  std::vector<at::Tensor> grad_pieces_;
};

}  // namespace ampt::distributed
