#include "ampt/distributed/zero_shards.h"

#include "ampt/distributed/process_group.h"
#include "ampt/kernels/gradient_pass.h"

#include <ATen/ops/_foreach_copy.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <algorithm>
#include <deque>

namespace ampt::distributed {

ZeroShards::ZeroShards(Group& group, int64_t stage, const std::vector<at::Tensor>& parameters,
                       const std::vector<at::Tensor>& masters, FlatLayout layout)
    : group_(group),
      stage_(stage),
      parameters_(parameters),
      layout_(std::move(layout)),
      pieces_(layout_.segments(group.rank())) {
  c10::NoGradGuard no_grad;
  for (const auto& unit : layout_.units()) sharded_.insert(sharded_.end(), unit.params.begin(), unit.params.end());
  std::sort(sharded_.begin(), sharded_.end());
  const auto options = parameters_.front().options().dtype(at::kFloat);
  // Zeros: the padding of every unit stays zero through the steps and the gathers.
  master_ = at::zeros({layout_.shard_numel()}, options);
  grad_ = at::zeros({layout_.shard_numel()}, options);
  std::vector<int64_t> position;
  std::vector<at::Tensor> sources;
  for (const auto& piece : pieces_) {
    master_pieces_.push_back(master_.narrow(0, piece.shard_offset, piece.count));
    grad_pieces_.push_back(grad_.narrow(0, piece.shard_offset, piece.count));
    sources.push_back(masters[piece.param].detach().reshape(-1).narrow(0, piece.begin, piece.count));
    position.push_back(std::lower_bound(sharded_.begin(), sharded_.end(), piece.param) - sharded_.begin());
  }
  if (!sources.empty()) at::_foreach_copy_(master_pieces_, sources);
  piece_position_ = at::tensor(position, at::kLong).to(options.device());
}

std::vector<at::Tensor> ZeroShards::unit_grad_slices() const {
  std::vector<at::Tensor> slices;
  for (size_t u = 0; u < layout_.units().size(); ++u) {
    slices.push_back(grad_.narrow(0, layout_.unit_shard_offset(u), layout_.unit_shard_numel(u)));
  }
  return slices;
}

const std::vector<at::Tensor>& ZeroShards::collect_grads() {
  c10::NoGradGuard no_grad;
  if (stage_ == 1) {
    std::vector<at::Tensor> targets;
    std::vector<at::Tensor> sources;
    for (size_t i = 0; i < pieces_.size(); ++i) {
      const auto& grad = parameters_[pieces_[i].param].grad();
      if (grad.defined()) {
        targets.push_back(grad_pieces_[i]);
        sources.push_back(grad.reshape(-1).narrow(0, pieces_[i].begin, pieces_[i].count));
      } else {
        grad_pieces_[i].zero_();
      }
    }
    if (!targets.empty()) at::_foreach_copy_(targets, sources);
  }
  for (const auto p : sharded_) parameters_[p].mutable_grad() = at::Tensor();
  return grad_pieces_;
}

at::Tensor ZeroShards::grad_norms(const std::vector<at::Tensor>& grads) {
  // Squares in float64: a sum of squares that overflows float32 would turn a finite norm inf.
  auto squares = at::zeros({static_cast<int64_t>(sharded_.size())},
                           master_.options().dtype(at::kDouble));
  if (!grads.empty()) {
    // The CPU's float32 pieces in one pass; a GPU's in one foreach launch.
    const auto norms = kernels::gradient_norms(grads).to(at::kDouble);
    squares.index_add_(0, piece_position_, norms * norms);
  }
  sum(squares, "the all-reduce of the gradient norms");
  return squares.sqrt().to(at::kFloat);
}

void ZeroShards::sum(at::Tensor& value, const char* what) {
  group_.all_reduce(value, Reduce::sum, what);
}

void ZeroShards::gather_weights() {
  // Stage 3 gathers each block when it computes (ShardedParameters): no rank holds them all.
  if (stage_ == 3) return;
  c10::NoGradGuard no_grad;
  constexpr const char* kWhat = "the all-gather of the updated weights";
  struct InFlight {
    size_t unit;
    at::Tensor input, output;
    c10::intrusive_ptr<c10d::Work> work;
  };
  std::deque<InFlight> in_flight;
  const auto land = [&] {
    auto& done = in_flight.front();
    group_.wait(done.work, kWhat);
    const auto& unit = layout_.units()[done.unit];
    std::vector<at::Tensor> targets;
    std::vector<at::Tensor> sources;
    int64_t offset = 0;
    for (size_t k = 0; k < unit.params.size(); ++k) {
      const auto& p = parameters_[unit.params[k]];
      targets.push_back(p);
      sources.push_back(done.output.narrow(0, offset, unit.numels[k]).view(p.sizes()));
      offset += unit.numels[k];
    }
    at::_foreach_copy_(targets, sources);
    in_flight.pop_front();
  };
  for (size_t u = 0; u < layout_.units().size(); ++u) {
    const auto dtype = parameters_[layout_.units()[u].params.front()].scalar_type();
    const int64_t slice = layout_.unit_shard_numel(u);
    InFlight next{u, master_.narrow(0, layout_.unit_shard_offset(u), slice), {}, {}};
    if (dtype != at::kFloat) next.input = next.input.to(dtype);
    next.output = at::empty({slice * layout_.world_size()}, next.input.options());
    if (in_flight.size() == 2) land();
    next.work = group_.all_gather_async(next.output, next.input, kWhat);
    in_flight.push_back(std::move(next));
  }
  while (!in_flight.empty()) land();
}

int64_t ZeroShards::bytes() const {
  return static_cast<int64_t>(master_.nbytes() + grad_.nbytes());
}

}  // namespace ampt::distributed
