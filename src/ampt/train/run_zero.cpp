#include "ampt/train/run.h"

#include "ampt/checkpoint/sharded_save.h"
#include "ampt/core/errors.h"
#include "ampt/distributed/sharded_parameters.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>

namespace ampt::train {

void Run::shard_state() {
  std::vector<torch::Tensor> master_tensors;
  std::vector<bool> decay;
  for (const auto& [name, master] : precision_.masters().masters()) {
    parameter_names_.push_back(name);
    master_tensors.push_back(master);
    decay.push_back(master.dim() >= 2);  // as make_optimizer decides for whole parameters
  }
  auto& masters = precision_.masters();
  if (dist_.zero_stage() == 3) {
    const auto blocks = zero3_blocks();
    dist_.attach(model_tensors(), parameters_, master_tensors, &blocks);
    block_gather_ = std::make_unique<BlockGather>(*dist_.sharded_parameters());
    model_.set_block_hooks(block_gather_.get());
    std::vector<std::string> piece_names;
    for (const auto& piece : dist_.zero()->pieces()) piece_names.push_back(parameter_names_[piece.param]);
    monitor_.watch_weights(dist_.zero()->master_pieces(), std::move(piece_names));
  } else {
    dist_.attach(model_tensors(), parameters_, master_tensors);
    masters.refresh_model();  // O2: rank 0's masters, broadcast, become every rank's half weights
  }
  masters.release_masters();
  auto zero = make_zero_optimizer(config_, *dist_.zero(), parameter_names_, decay);
  optimizer_ = std::move(zero.optimizer);
  zero_state_ = std::move(zero.state);
  zero_kinds_ = std::move(zero.kinds);
}

void Run::check_zero3() const {
  if (config_.zero_stage != 3) return;
  if (model_.layers.blocks.empty() || !model_.set_block_hooks) {
    throw UsageError(fmt::format(
        "zero_stage 3 gathers a model's weights block by block, and model {} has no transformer "
        "blocks to hook: use zero_stage 2, or a gpt, llama, qwen2, qwen3 or mistral model",
        config_.model));
  }
  if (config_.lora_rank > 0) {
    throw UsageError(
        "zero_stage 3 does not shard a LoRA run: its frozen base is no part of ZeRO's shards; use "
        "zero_stage 2, which shards the adapters' gradients and optimizer state");
  }
}

distributed::ParameterBlocks Run::zero3_blocks() const {
  return parameter_blocks(*model_.module, model_.layers.blocks, parameter_names_, parameters_,
                          precision_.islands(), precision_.policy(), config_.param_dtype,
                          precision_.masters().enabled());
}

void Run::gather_root() {
  if (auto* sharded = dist_.sharded_parameters()) sharded->gather(sharded->root());
}

void Run::release_gathered() {
  if (auto* sharded = dist_.sharded_parameters()) sharded->release_all();
}

void Run::restore_shards(checkpoint::CheckpointReader& reader) {
  auto& zero = *dist_.zero();
  const auto expect = [&](const std::string& name, const std::vector<int64_t>& shape,
                          const char* what) {
    const auto found = reader.shape(name);
    if (!found) {
      throw RuntimeError(fmt::format("checkpoint '{}' has no {} tensor '{}' (shape [{}]): it was "
                                     "saved from a different model",
                                     reader.path(), what, name, fmt::join(shape, ", ")));
    }
    if (*found != shape) {
      throw RuntimeError(fmt::format("checkpoint '{}': {} tensor '{}' has shape [{}], the model "
                                     "expects [{}]",
                                     reader.path(), what, name, fmt::join(*found, ", "),
                                     fmt::join(shape, ", ")));
    }
  };
  for (const auto p : zero.sharded_parameters()) {
    const auto& name = parameter_names_[p];
    const auto shape = parameters_[p].sizes().vec();
    expect(name, shape, "model");
    for (const auto& kind : zero_kinds_) {
      expect(name + "." + kind.name, kind.per_element ? shape : std::vector<int64_t>{}, "optimizer");
    }
  }
  const auto buffers = model_.module->named_buffers();
  for (const auto& item : buffers) expect(item.key(), item.value().sizes().vec(), "model");

  torch::NoGradGuard no_grad;
  const auto& pieces = zero.pieces();
  for (size_t i = 0; i < pieces.size(); ++i) {
    const auto& piece = pieces[i];
    const auto& name = parameter_names_[piece.param];
    reader.read(name, piece.begin, piece.count, zero.master_pieces()[i]);
    for (size_t k = 0; k < zero_kinds_.size(); ++k) {
      const auto& flat = zero_state_[k].second;
      const auto state = name + "." + zero_kinds_[k].name;
      if (zero_kinds_[k].per_element) {
        reader.read(state, piece.begin, piece.count, flat.narrow(0, piece.shard_offset, piece.count));
      } else {
        reader.read(state, 0, 1, flat.narrow(0, static_cast<int64_t>(i), 1));
      }
    }
  }
  for (const auto& item : buffers) reader.read(item.key(), 0, item.value().numel(), item.value().view(-1));
  zero.gather_weights();
}

NamedTensors Run::shard_tensors() const {
  NamedTensors tensors{{"master", dist_.zero()->master_shard()}};
  tensors.insert(tensors.end(), zero_state_.begin(), zero_state_.end());
  if (dist_.is_main()) {
    for (const auto& item : model_.module->named_buffers()) tensors.emplace_back(item.key(), item.value());
  }
  return tensors;
}

Checkpointer::Write Run::shard_write(checkpoint::Checkpoint meta, const NamedTensors& host) {
  const auto& zero = *dist_.zero();
  checkpoint::ShardedSave save;
  const auto shard_end = host.begin() + static_cast<std::ptrdiff_t>(1 + zero_state_.size());
  save.shard.assign(host.begin(), shard_end);
  save.meta = std::move(meta);
  save.meta.model.assign(shard_end, host.end());  // rank 0: the buffers
  save.rank = dist_.rank();
  auto& layout = save.layout;
  layout.names = parameter_names_;
  for (const auto& p : parameters_) layout.shapes.push_back(p.sizes().vec());
  layout.layout = zero.layout();
  layout.per_element = {"master"};
  for (const auto& kind : zero_kinds_) (kind.per_element ? layout.per_element : layout.per_piece).push_back(kind.name);
  // Every rank starts its saves in the same order: the count names this one's reports.
  auto key = fmt::format("checkpoint/{}", saves_started_++);
  return [this, save = std::move(save), key = std::move(key), dir = config_.output_dir,
          keep = config_.keep_checkpoints] {
    checkpoint::save_sharded(dir, save, keep, [this, &key](const std::string& report) {
      return dist_.gather_text(key, report, "the exchange of checkpoint shard reports");
    });
  };
}

std::string Run::zero_note() const {
  if (config_.zero_stage > 0 && !dist_.active()) {
    return fmt::format("zero_stage {} has nothing to shard in a single process: everything stays "
                       "whole",
                       config_.zero_stage);
  }
  const auto* zero = dist_.zero();
  if (zero == nullptr) return "";
  const auto& masters = precision_.masters();
  double count = 0.0, weights = 0.0, full_grads = 0.0;
  for (const auto& p : parameters_) {
    count += static_cast<double>(p.numel());
    // Stage 3 gathers O1's Linear weights in the compute dtype: without ZeRO they are fp32.
    const double whole = masters.enabled() ? static_cast<double>(p.nbytes()) : 4.0 * static_cast<double>(p.numel());
    weights += whole;
    full_grads += whole;
  }
  double optimizer = 0.0, full_optimizer = 0.0;
  for (const auto& [name, state] : zero_state_) optimizer += static_cast<double>(state.nbytes());
  for (const auto& kind : zero_kinds_) full_optimizer += kind.per_element ? 4.0 * count : 0.0;
  const double master = static_cast<double>(zero->master_shard().nbytes());
  const double grads = zero->stage() >= 2 ? static_cast<double>(zero->master_shard().nbytes()) : full_grads;
  const double full_masters =
      masters.enabled() && masters.dtype() != torch::kFloat ? 4.0 * count : 0.0;
  if (const auto* sharded = dist_.sharded_parameters()) {
    // What is whole at once: the root for the step, and the block computing with the next one
    // coming (the two largest bound it).
    std::vector<int64_t> blocks;
    for (int64_t b = 0; b < sharded->blocks(); ++b) blocks.push_back(sharded->block_bytes(b));
    std::sort(blocks.rbegin(), blocks.rend());
    double gathered = static_cast<double>(sharded->block_bytes(sharded->root()));
    for (size_t i = 0; i < std::min<size_t>(2, blocks.size()); ++i) gathered += static_cast<double>(blocks[i]);
    return fmt::format(
        "stage 3 over {} ranks (parameters, gradients and optimizer state sharded; each block "
        "all-gathered when it computes, in {}): bytes per parameter on each rank: gathered "
        "weights at most {:.2f} (the root and two of {} blocks) + gradient shard {:.2f} + fp32 "
        "master shard {:.2f} + optimizer state {:.2f} = {:.2f} (without ZeRO {:.2f}); the shards "
        "hold this rank's 1/{} of {} flat units",
        dist_.world_size(), c10::toString(gather_dtype(config_.param_dtype, precision_.policy())),
        gathered / count, sharded->blocks(), grads / count, master / count, optimizer / count,
        (gathered + grads + master + optimizer) / count,
        (weights + full_grads + full_masters + full_optimizer) / count, dist_.world_size(),
        zero->layout().units().size());
  }
  return fmt::format(
      "stage {} over {} ranks ({}): bytes per parameter on each rank: weights {:.2f} + gradients "
      "{:.2f} + fp32 master shard {:.2f} + optimizer state {:.2f} = {:.2f} (without ZeRO {:.2f}); "
      "the shards hold this rank's 1/{} of {} flat bucket{}",
      zero->stage(), dist_.world_size(),
      zero->stage() == 1 ? "optimizer state sharded" : "optimizer state and gradients sharded",
      weights / count, grads / count, master / count, optimizer / count,
      (weights + grads + master + optimizer) / count,
      (weights + full_grads + full_masters + full_optimizer) / count, dist_.world_size(),
      zero->layout().units().size(), zero->layout().units().size() > 1 ? "s" : "");
}

}  // namespace ampt::train
