#include "ampt/distributed/sharded_parameters.h"

#include "ampt/distributed/process_group.h"
#include "ampt/distributed/zero_shards.h"

#include <ATen/ops/empty.h>
#include <c10/core/GradMode.h>
#include <c10/core/StorageImpl.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <algorithm>
#include <map>

namespace ampt::distributed {
namespace {

constexpr const char* kWhat = "the all-gather of a block's parameters (ZeRO-3)";

c10::StorageImpl& storage_of(const at::Tensor& t) { return *t.storage().unsafeGetStorageImpl(); }

}  // namespace

std::vector<FlatUnit> plan_block_units(const std::vector<at::Tensor>& parameters,
                                       const ParameterBlocks& blocks) {
  std::vector<FlatUnit> units;
  const auto add_block = [&](int64_t block) {
    std::map<c10::ScalarType, size_t> unit_of_dtype;
    for (size_t i = 0; i < blocks.block.size(); ++i) {
      if (blocks.block[i] != block) continue;
      auto found = unit_of_dtype.find(blocks.dtype[i]);
      if (found == unit_of_dtype.end()) {
        units.emplace_back();
        found = unit_of_dtype.emplace(blocks.dtype[i], units.size() - 1).first;
      }
      units[found->second].params.push_back(static_cast<int64_t>(i));
      units[found->second].numels.push_back(parameters[i].numel());
    }
  };
  for (int64_t b = blocks.count; b-- > 0;) add_block(b);
  add_block(-1);
  return units;
}

ShardedParameters::ShardedParameters(Group& group, ZeroShards& shards,
                                     std::vector<at::Tensor> parameters,
                                     const ParameterBlocks& blocks, const FrozenTensors& frozen)
    : group_(group),
      shards_(shards),
      parameters_(std::move(parameters)),
      blocks_(blocks.count),
      units_(shards.layout().units().size()),
      units_of_block_(static_cast<size_t>(blocks_ + 1)),
      root_unit_(units_.size(), false),
      frozen_of_block_(static_cast<size_t>(blocks_ + 1)) {
  c10::NoGradGuard no_grad;
  const auto& layout = shards_.layout();
  for (size_t u = 0; u < units_.size(); ++u) {
    const auto& unit = layout.units()[u];
    const auto first = static_cast<size_t>(unit.params.front());
    const auto block = blocks.block[first];
    root_unit_[u] = block < 0;
    units_of_block_[static_cast<size_t>(block < 0 ? blocks_ : block)].push_back(u);
    units_[u].follows_compute = blocks.follows_compute[first];
    units_[u].flat = at::empty({layout.unit_shard_numel(u) * layout.world_size()},
                               parameters_[first].options().dtype(blocks.dtype[first]));
    point_parameters(u);
    free_locked(u);
  }
  for (int64_t b = blocks_; b-- > 0;) add_frozen_unit(frozen, b);
  add_frozen_unit(frozen, -1);
}

void ShardedParameters::add_frozen_unit(const FrozenTensors& frozen, int64_t block) {
  // Each tensor at a 64-byte boundary, so that its bytes view as its dtype.
  constexpr int64_t kAlign = 64;
  Unit unit;
  int64_t bytes = 0;
  for (size_t i = 0; i < frozen.tensors.size(); ++i) {
    if (frozen.block[i] != block) continue;
    unit.frozen.push_back(frozen.tensors[i]);
    unit.offsets.push_back(bytes);
    bytes += (static_cast<int64_t>(frozen.tensors[i].nbytes()) + kAlign - 1) / kAlign * kAlign;
  }
  if (unit.frozen.empty()) return;
  const int64_t world = shards_.layout().world_size();
  const int64_t slice = (bytes + world - 1) / world;
  unit.flat = at::zeros({slice * world}, unit.frozen.front().options().dtype(at::kByte));
  for (size_t k = 0; k < unit.frozen.size(); ++k) {
    const auto& t = unit.frozen[k];
    unit.flat.narrow(0, unit.offsets[k], static_cast<int64_t>(t.nbytes()))
        .copy_(t.contiguous().view(-1).view(at::kByte));
  }
  unit.shard = unit.flat.narrow(0, group_.rank() * slice, slice).clone();
  units_.push_back(std::move(unit));
  root_unit_.push_back(block < 0);
  const auto u = units_.size() - 1;
  units_of_block_[static_cast<size_t>(block < 0 ? blocks_ : block)].push_back(u);
  frozen_of_block_[static_cast<size_t>(block < 0 ? blocks_ : block)].push_back(u);
  point_parameters(u);
  free_locked(u);
}

ShardedParameters::~ShardedParameters() {
  std::lock_guard lock(mutex_);
  // A collective still in flight writes into storage that must outlive it.
  for (size_t u = 0; u < units_.size(); ++u) {
    if (units_[u].state == State::in_flight) {
      try {
        wait_locked(u);
      } catch (...) {  // a failed run is being torn down: its error is already on its way
      }
    }
  }
}

void ShardedParameters::point_parameters(size_t u) {
  if (!units_[u].frozen.empty()) {
    const auto& flat = units_[u].flat;
    for (size_t k = 0; k < units_[u].frozen.size(); ++k) {
      auto& t = units_[u].frozen[k];
      t.set_data(flat.narrow(0, units_[u].offsets[k], static_cast<int64_t>(t.nbytes()))
                     .view(t.scalar_type())
                     .view(t.sizes()));
    }
    return;
  }
  const auto& unit = shards_.layout().units()[u];
  int64_t offset = 0;
  for (size_t k = 0; k < unit.params.size(); ++k) {
    auto& p = parameters_[static_cast<size_t>(unit.params[k])];
    p.mutable_grad() = at::Tensor();  // a gradient of the old storage's dtype
    p.set_data(units_[u].flat.narrow(0, offset, unit.numels[k]).view(p.sizes()));
    offset += unit.numels[k];
  }
}

void ShardedParameters::start_locked(size_t u) {
  auto& unit = units_[u];
  if (unit.state != State::released) return;
  auto& storage = storage_of(unit.flat);
  const auto bytes = static_cast<size_t>(unit.flat.numel()) * unit.flat.element_size();
  storage.set_data_ptr_noswap(storage.allocator()->allocate(bytes));
  storage.set_nbytes(bytes);
  gathered_ += static_cast<int64_t>(bytes);
  peak_ = std::max(peak_, gathered_);
  const auto& layout = shards_.layout();
  if (!unit.frozen.empty()) {
    unit.input = unit.shard;
  } else {
    unit.input = shards_.master_shard().narrow(0, layout.unit_shard_offset(u),
                                               layout.unit_shard_numel(u));
    if (unit.input.scalar_type() != unit.flat.scalar_type()) {
      unit.input = unit.input.to(unit.flat.scalar_type());
    }
  }
  unit.work = group_.all_gather_async(unit.flat, unit.input, kWhat);
  unit.state = State::in_flight;
}

void ShardedParameters::wait_locked(size_t u) {
  auto& unit = units_[u];
  if (unit.state != State::in_flight) return;
  // Marked done first: a wait that throws leaves nothing to wait for again in the destructor.
  unit.state = State::gathered;
  auto work = std::move(unit.work);
  unit.input = at::Tensor();
  group_.wait(work, kWhat);
}

void ShardedParameters::free_locked(size_t u) {
  auto& unit = units_[u];
  if (unit.state == State::in_flight) wait_locked(u);
  auto& storage = storage_of(unit.flat);
  // A unit built or re-typed just now holds storage that was never counted as gathered.
  if (unit.state != State::released) gathered_ -= static_cast<int64_t>(storage.nbytes());
  storage.set_data_ptr_noswap(at::DataPtr(nullptr, unit.flat.device()));
  storage.set_nbytes(0);
  unit.state = State::released;
}

void ShardedParameters::prefetch(int64_t block) {
  std::lock_guard lock(mutex_);
  c10::NoGradGuard no_grad;
  for (const auto u : units_of_block_[static_cast<size_t>(block)]) start_locked(u);
}

void ShardedParameters::gather(int64_t block) {
  std::lock_guard lock(mutex_);
  c10::NoGradGuard no_grad;
  const auto& units = units_of_block_[static_cast<size_t>(block)];
  for (const auto u : units) start_locked(u);
  for (const auto u : units) wait_locked(u);
}

void ShardedParameters::release(int64_t block) {
  std::lock_guard lock(mutex_);
  for (const auto u : units_of_block_[static_cast<size_t>(block)]) {
    if (units_[u].state != State::released) free_locked(u);
  }
}

void ShardedParameters::release_unit(size_t unit) {
  std::lock_guard lock(mutex_);
  if (!root_unit_[unit] && units_[unit].state != State::released) free_locked(unit);
}

void ShardedParameters::release_frozen(int64_t block) {
  std::lock_guard lock(mutex_);
  for (const auto u : frozen_of_block_[static_cast<size_t>(block)]) {
    if (units_[u].state != State::released) free_locked(u);
  }
}

void ShardedParameters::release_all() {
  std::lock_guard lock(mutex_);
  for (size_t u = 0; u < units_.size(); ++u) {
    if (units_[u].state != State::released) free_locked(u);
  }
}

void ShardedParameters::set_compute_dtype(c10::ScalarType dtype) {
  std::lock_guard lock(mutex_);
  c10::NoGradGuard no_grad;
  for (size_t u = 0; u < units_.size(); ++u) {
    auto& unit = units_[u];
    if (!unit.follows_compute || unit.flat.scalar_type() == dtype) continue;
    if (unit.state != State::released) free_locked(u);
    unit.flat = at::empty({unit.flat.numel()}, unit.flat.options().dtype(dtype));
    point_parameters(u);
    free_locked(u);
  }
}

int64_t ShardedParameters::frozen_shard_bytes() const {
  std::lock_guard lock(mutex_);
  int64_t bytes = 0;
  for (const auto& unit : units_) {
    if (unit.shard.defined()) bytes += static_cast<int64_t>(unit.shard.nbytes());
  }
  return bytes;
}

int64_t ShardedParameters::gathered_bytes() const {
  std::lock_guard lock(mutex_);
  return gathered_;
}

int64_t ShardedParameters::peak_gathered_bytes() const {
  std::lock_guard lock(mutex_);
  return peak_;
}

int64_t ShardedParameters::block_bytes(int64_t block) const {
  std::lock_guard lock(mutex_);
  int64_t bytes = 0;
  for (const auto u : units_of_block_[static_cast<size_t>(block)]) {
    bytes += units_[u].flat.numel() * static_cast<int64_t>(units_[u].flat.element_size());
  }
  return bytes;
}

}  // namespace ampt::distributed
