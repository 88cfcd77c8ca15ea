#include "ampt/train/train_state.h"

#include "ampt/train/expert_parallel.h"

#include "ampt/checkpoint/sharded_save.h"
#include "ampt/core/errors.h"
#include "ampt/distributed/sharded_parameters.h"
#include "ampt/models/quantizable.h"
#include "ampt/models/model_family.h"
#include "ampt/precision/placeholder.h"
#include "ampt/train/block_gather.h"
#include "ampt/train/zero_optimizer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <map>

namespace ampt::train {
namespace {

// A LoRA run's frozen base by block, for stage 3 to shard: its dense frozen parameters (not a
// quantized weight's placeholder) and a quantized base's storage.
// Experts that expert parallelism divides stay with their ranks.
distributed::FrozenTensors frozen_tensors(const TrainStateParts& parts, const ExpertParallel* experts) {
  distributed::FrozenTensors out;
  const auto& blocks = parts.model.layers.blocks;
  const auto divided = [experts](const std::string& name) {
    return experts != nullptr && experts->slice(name) != nullptr;
  };
  for (const auto& [name, tensor] : parts.precision.masters().frozen()) {
    if (precision::is_placeholder(tensor) || divided(name)) continue;
    out.tensors.push_back(tensor);
    out.block.push_back(block_index(name, blocks));
  }
  for (const auto& weight : models::quantizable_weights(*parts.model.module)) {
    if (!weight.quantized() || divided(weight.name)) continue;
    for (const auto& tensor : weight.quantized()->tensors()) {
      out.tensors.push_back(tensor);
      out.block.push_back(block_index(weight.name, blocks));
    }
  }
  return out;
}

// This rank's shard of the gradients, their norms the whole parameters', and the stepped shards
// all-gathered into every rank's weights (O1's half copies then follow them).
class ShardGradients final : public StepGradients {
 public:
  // `positions`: each of the shards' parameters' index among the run's.
  ShardGradients(distributed::ZeroShards& zero, precision::HalfWeights& half,
                 std::vector<int64_t> positions)
      : zero_(zero), half_(half), positions_(std::move(positions)) {}
  Collected collect(const std::vector<torch::Tensor>&) override {
    std::vector<int64_t> params;
    for (const auto p : zero_.sharded_parameters()) params.push_back(positions_[static_cast<size_t>(p)]);
    return {zero_.collect_grads(), std::move(params)};
  }
  torch::Tensor norms(const std::vector<torch::Tensor>& grads) override {
    return zero_.grad_norms(grads);
  }
  torch::Tensor underflow(const std::vector<torch::Tensor>& grads, c10::ScalarType half) override {
    auto counts = StepGradients::underflow(grads, half).to(zero_.master_shard().device());
    zero_.sum(counts, "the all-reduce of the underflow counts");
    return counts;
  }
  void weights_stepped() override {
    zero_.gather_weights();
    half_.refresh();
  }

 private:
  distributed::ZeroShards& zero_;
  precision::HalfWeights& half_;
  std::vector<int64_t> positions_;
};

// ZeRO: each rank holds its shard of the fp32 masters and of the optimizer's state (and at stage
// 2 and 3 of the gradients; at stage 3 of the weights, gathered block by block), and saves it.
// Under expert parallelism the shards hold the dense parameters: the experts, already divided
// among their group's ranks, stay whole on them, stepped by the same optimizer, and a save
// gathers them whole into rank 0's common file.
class ShardedState final : public TrainState {
 public:
  // Cuts this rank's shard of the masters (broadcast from rank 0 first), drops O2's full masters
  // and builds the optimizer over the shard.
  explicit ShardedState(TrainStateParts parts);

  NamedTensors tensors() const override;
  void restore(checkpoint::CheckpointReader& reader) override;
  std::string save_path(const std::string& dir, int64_t step) const override {
    return (std::filesystem::path(dir) / checkpoint::checkpoint_dir_name(step)).string();
  }
  Checkpointer::Write write(checkpoint::Checkpoint meta, NamedTensors host) override;

  void step_parts(StepParts& parts) override {
    parts.optimizer = optimizer_.get();
    parts.gradients = experts_ ? &experts_->gradients(*gradients_) : gradients_.get();
  }
  // The AdamW kernel's O1 half copies need whole parameters: the shard's optimizer is ATen's.
  std::vector<kernels::FusedPath> fused_paths() const override { return {}; }
  std::string note() const override;

  bool forward_is_collective() const override {
    return parts_.dist.sharded_parameters() != nullptr || experts_ != nullptr;
  }
  std::string parallel_note() const override { return experts_ ? experts_->describe() : ""; }
  // Stage 3 gathers the Linear weights in the dtype the new stage computes in.
  void precision_changed() override {
    if (auto* sharded = parts_.dist.sharded_parameters()) {
      sharded->set_compute_dtype(
          gather_dtype(parts_.config.param_dtype, parts_.precision.policy()));
    }
  }

 private:
  // The optimizer's state as flat tensors (ZeroOptimizer::state) and kinds, the parameters' names
  // and how many saves this run has started (each save's key).
  NamedTensors state_;
  std::vector<StateKind> kinds_;
  std::vector<std::string> names_;
  // The sharded parameters (names_'s), and each one's index among the run's.
  std::vector<torch::Tensor> params_;
  std::vector<int64_t> positions_;
  // Expert parallelism's experts, outside the shards, and their optimizer state.
  std::unique_ptr<ExpertParallel> experts_;
  NamedTensors expert_weights_;
  NamedTensors expert_state_;
  int64_t saves_started_ = 0;
  // Stage 3's hooks on the model's blocks; the model calls them until this state is destroyed.
  std::unique_ptr<BlockGather> block_gather_;
  std::unique_ptr<ShardGradients> gradients_;  // once attached to the ranks
};

ShardedState::ShardedState(TrainStateParts parts)
    : TrainState(parts), experts_(ExpertParallel::make(parts_.dist, *parts_.model.module)) {
  std::vector<torch::Tensor> master_tensors;
  std::vector<bool> decay;
  auto& masters = parts_.precision.masters();
  const auto all = masters.masters();  // below O2 (check_train_state): the parameters themselves
  for (size_t i = 0; i < all.size(); ++i) {
    const auto& [name, master] = all[i];
    if (experts_ && experts_->is_expert(master)) {
      expert_weights_.emplace_back(name, master);
      continue;
    }
    names_.push_back(name);
    params_.push_back(parts_.parameters[i]);
    positions_.push_back(static_cast<int64_t>(i));
    master_tensors.push_back(master);
    decay.push_back(master.dim() >= 2);  // as make_optimizer decides for whole parameters
  }
  auto& dist = parts_.dist;
  auto model = model_tensors(parts_.precision, parts_.model);
  if (experts_) {
    experts_->share_experts(model);
    model = experts_->without_experts(model);
  }
  if (dist.zero_stage() == 3) {
    const auto blocks = parameter_blocks(*parts_.model.module, parts_.model.layers.blocks, names_,
                                         params_, parts_.precision.islands(),
                                         parts_.precision.policy(), parts_.config.param_dtype,
                                         masters.enabled());
    dist.attach(model, params_, master_tensors, &blocks, frozen_tensors(parts_, experts_.get()));
    block_gather_ = std::make_unique<BlockGather>(*dist.sharded_parameters());
    parts_.model.set_block_hooks(block_gather_.get());
    std::vector<torch::Tensor> weights = dist.zero()->master_pieces();
    std::vector<std::string> weight_names;
    for (const auto& piece : dist.zero()->pieces()) weight_names.push_back(names_[piece.param]);
    for (const auto& [name, weight] : expert_weights_) {
      weights.push_back(weight);
      weight_names.push_back(name);
    }
    parts_.monitor.watch_weights(std::move(weights), std::move(weight_names));
  } else {
    dist.attach(model, params_, master_tensors);
    masters.refresh_model();  // O2: rank 0's masters, broadcast, become every rank's half weights
  }
  masters.release_masters();
  gradients_ = std::make_unique<ShardGradients>(*dist.zero(), parts_.precision.half_weights(), positions_);
  auto zero = make_zero_optimizer(parts_.config, *dist.zero(), names_, decay,
                                  experts_ ? experts_->replica_shares(expert_weights_) : expert_weights_);
  optimizer_ = std::move(zero.optimizer);
  state_ = std::move(zero.state);
  kinds_ = std::move(zero.kinds);
  expert_state_ = std::move(zero.whole_state);
}

void ShardedState::restore(checkpoint::CheckpointReader& reader) {
  auto& zero = *parts_.dist.zero();
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
  const auto expect_with_state = [&](const std::string& name, const std::vector<int64_t>& shape) {
    expect(name, shape, "model");
    for (const auto& kind : kinds_) {
      expect(name + "." + kind.name, kind.per_element ? shape : std::vector<int64_t>{}, "optimizer");
    }
  };
  for (const auto p : zero.sharded_parameters()) expect_with_state(names_[p], params_[p].sizes().vec());
  // A checkpoint holds whole experts; this rank reads its slice of them.
  for (const auto& [name, weight] : expert_weights_) {
    auto shape = weight.sizes().vec();
    shape[0] = experts_->slice(name)->total;
    expect_with_state(name, shape);
  }
  const auto buffers = parts_.model.module->named_buffers();
  for (const auto& item : buffers) expect(item.key(), item.value().sizes().vec(), "model");

  torch::NoGradGuard no_grad;
  const auto& pieces = zero.pieces();
  for (size_t i = 0; i < pieces.size(); ++i) {
    const auto& piece = pieces[i];
    const auto& name = names_[piece.param];
    reader.read(name, piece.begin, piece.count, zero.master_pieces()[i]);
    for (size_t k = 0; k < kinds_.size(); ++k) {
      const auto& flat = state_[k].second;
      const auto state = name + "." + kinds_[k].name;
      if (kinds_[k].per_element) {
        reader.read(state, piece.begin, piece.count, flat.narrow(0, piece.shard_offset, piece.count));
      } else {
        reader.read(state, 0, 1, flat.narrow(0, static_cast<int64_t>(i), 1));
      }
    }
  }
  for (const auto& item : buffers) reader.read(item.key(), 0, item.value().numel(), item.value().view(-1));
  const std::map<std::string, torch::Tensor> expert_state(expert_state_.begin(), expert_state_.end());
  for (const auto& [name, weight] : expert_weights_) {
    const auto& slice = *experts_->slice(name);
    // An expert's elements are contiguous in its stack's: this rank's are one range, from its
    // first expert (and, for the optimizer state the replicas share, its first row of those).
    const auto read_rows = [&](const std::string& saved, const torch::Tensor& into, int64_t first) {
      const auto per_row = into.numel() / into.size(0);
      reader.read(saved, (slice.first + first) * per_row, into.numel(), into.view(-1));
    };
    read_rows(name, weight, 0);
    const auto shared = experts_->share_rows(name).first;
    for (const auto& kind : kinds_) {
      const auto saved = name + "." + kind.name;
      const auto& into = expert_state.at(saved);
      if (kind.per_element) {
        read_rows(saved, into, shared);
      } else {
        reader.read(saved, 0, 1, into.view(-1));
      }
    }
  }
  zero.gather_weights();
}

NamedTensors ShardedState::tensors() const {
  NamedTensors tensors{{"master", parts_.dist.zero()->master_shard()}};
  tensors.insert(tensors.end(), state_.begin(), state_.end());
  // Rank 0's common file: the buffers, then the whole experts and their state (gathered by rank
  // 0's expert group, whose ranks all take part).
  auto experts = expert_weights_;
  experts.insert(experts.end(), expert_state_.begin(), expert_state_.end());
  if (experts_) experts = experts_->whole(std::move(experts));
  if (parts_.dist.is_main()) {
    for (const auto& item : parts_.model.module->named_buffers()) {
      tensors.emplace_back(item.key(), item.value());
    }
    tensors.insert(tensors.end(), experts.begin(), experts.end());
  }
  return tensors;
}

Checkpointer::Write ShardedState::write(checkpoint::Checkpoint meta, NamedTensors host) {
  const auto& zero = *parts_.dist.zero();
  checkpoint::ShardedSave save;
  const auto shard_end = host.begin() + static_cast<std::ptrdiff_t>(1 + state_.size());
  save.shard.assign(host.begin(), shard_end);
  save.meta = std::move(meta);
  // Rank 0: the buffers and the experts, then the experts' optimizer state.
  const auto state_begin = parts_.dist.is_main()
                               ? host.end() - static_cast<std::ptrdiff_t>(expert_state_.size())
                               : host.end();
  save.meta.model.assign(shard_end, state_begin);
  save.meta.optimizer.assign(state_begin, host.end());
  save.rank = parts_.dist.rank();
  auto& layout = save.layout;
  layout.names = names_;
  for (const auto& p : params_) layout.shapes.push_back(p.sizes().vec());
  layout.layout = zero.layout();
  layout.per_element = {"master"};
  for (const auto& kind : kinds_) (kind.per_element ? layout.per_element : layout.per_piece).push_back(kind.name);
  // Every rank starts its saves in the same order: the count names this one's reports.
  auto key = fmt::format("checkpoint/{}", saves_started_++);
  return [this, save = std::move(save), key = std::move(key), dir = parts_.config.output_dir,
          keep = parts_.config.keep_checkpoints] {
    checkpoint::save_sharded(dir, save, keep, [this, &key](const std::string& report) {
      return parts_.dist.gather_text(key, report, "the exchange of checkpoint shard reports");
    });
  };
}

std::string ShardedState::note() const {
  const auto& dist = parts_.dist;
  const auto& zero = *dist.zero();
  const auto& masters = parts_.precision.masters();
  // Per sharded parameter: the experts that expert parallelism divides are outside the shards.
  double count = 0.0, weights = 0.0, full_grads = 0.0;
  for (const auto& p : params_) {
    count += static_cast<double>(p.numel());
    // Stage 3 gathers O1's Linear weights in the compute dtype: without ZeRO they are fp32.
    const double whole = masters.enabled() ? static_cast<double>(p.nbytes()) : 4.0 * static_cast<double>(p.numel());
    weights += whole;
    full_grads += whole;
  }
  double optimizer = 0.0, full_optimizer = 0.0;
  for (const auto& [name, state] : state_) optimizer += static_cast<double>(state.nbytes());
  for (const auto& kind : kinds_) full_optimizer += kind.per_element ? 4.0 * count : 0.0;
  const double master = static_cast<double>(zero.master_shard().nbytes());
  const double grads = zero.stage() >= 2 ? static_cast<double>(zero.master_shard().nbytes()) : full_grads;
  const double full_masters =
      masters.enabled() && masters.dtype() != torch::kFloat ? 4.0 * count : 0.0;
  std::string experts;
  if (experts_) {
    double held = 0.0;
    for (const auto& [name, weight] : expert_weights_) held += static_cast<double>(weight.numel());
    const int64_t sharing = experts_->sharing_replicas();
    experts = fmt::format("; the experts are outside the shards: expert parallelism divides them, "
                          "and this rank keeps its {:.2f}M expert parameters whole with their "
                          "gradients, and {} optimizer state{}",
                          held / 1e6, sharing > 1 ? fmt::format("1/{} of their", sharing) : "their",
                          sharing > 1 ? fmt::format(" (its {} replicas step a share each and "
                                                    "all-gather the rows)",
                                                    sharing)
                                      : "");
  }
  if (const auto* sharded = dist.sharded_parameters()) {
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
        "hold this rank's 1/{} of {} flat units{}{}",
        dist.world_size(),
        c10::toString(gather_dtype(parts_.config.param_dtype, parts_.precision.policy())),
        gathered / count, sharded->blocks(), grads / count, master / count, optimizer / count,
        (gathered + grads + master + optimizer) / count,
        (weights + full_grads + full_masters + full_optimizer) / count, dist.world_size(),
        zero.layout().units().size(),
        sharded->frozen_shard_bytes() == 0
            ? std::string()
            : fmt::format("; the frozen base's bytes, in their storage form, are sharded too: "
                          "this rank keeps {:.1f} MiB, 1/{} of them, and gathers each block's "
                          "with its adapters",
                          static_cast<double>(sharded->frozen_shard_bytes()) / (1 << 20),
                          dist.world_size()),
        experts);
  }
  return fmt::format(
      "stage {} over {} ranks ({}): bytes per parameter on each rank: weights {:.2f} + gradients "
      "{:.2f} + fp32 master shard {:.2f} + optimizer state {:.2f} = {:.2f} (without ZeRO {:.2f}); "
      "the shards hold this rank's 1/{} of {} flat bucket{}{}",
      zero.stage(), dist.world_size(),
      zero.stage() == 1 ? "optimizer state sharded" : "optimizer state and gradients sharded",
      weights / count, grads / count, master / count, optimizer / count,
      (weights + grads + master + optimizer) / count,
      (weights + full_grads + full_masters + full_optimizer) / count, dist.world_size(),
      zero.layout().units().size(), zero.layout().units().size() > 1 ? "s" : "", experts);
}

}  // namespace

void check_train_state(const TrainStateParts& parts) {
  check_expert_parallel(parts.config, *parts.model.module);
  const auto& config = parts.config;
  const auto stage = parts.dist.zero_stage();
  if (stage > 0 && parts.precision.masters().enabled() && parts.precision.stages().size() > 1) {
    throw UsageError(fmt::format(
        "zero_stage {} with amp_opt_level O2 cannot follow a precision schedule: a switch re-casts "
        "the half weights from fp32 masters that ZeRO keeps sharded; use amp_opt_level O1, or "
        "zero_stage 0",
        stage));
  }
  // Refused in a single process too, where the stage has nothing to shard: the same command
  // would fail once launched on several ranks.
  if (config.zero_stage > 0 && parts.precision.masters().enabled() && config.expert_parallel > 1) {
    throw UsageError(fmt::format(
        "zero_stage {} with expert_parallel {} and amp_opt_level O2: ZeRO shards the fp32 masters "
        "of the dense weights only, and the experts it leaves whole on their ranks would have no "
        "masters; use amp_opt_level O1, or zero_stage 0",
        config.zero_stage, config.expert_parallel));
  }
  // Refused in a single process too, where the stage has nothing to shard: the same command
  // would fail once launched on several ranks.
  if (config.zero_stage != 3) return;
  if (parts.model.layers.blocks.empty() || !parts.model.set_block_hooks) {
    auto kinds = models::transformer_model_kinds();
    const auto last = kinds.back();
    kinds.pop_back();
    throw UsageError(fmt::format(
        "zero_stage 3 gathers a model's weights block by block, and model {} has no transformer "
        "blocks to hook: use zero_stage 2, or a {} or {} model",
        config.model, fmt::join(kinds, ", "), last));
  }
}

std::unique_ptr<TrainState> make_sharded_state(TrainStateParts parts) {
  return std::make_unique<ShardedState>(parts);
}

}  // namespace ampt::train
