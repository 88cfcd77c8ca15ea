#include "ampt/train/train_state.h"

#include "ampt/train/expert_parallel.h"

#include <fmt/format.h>

#include <filesystem>
#include <iterator>

namespace ampt::train {
namespace {

// The parameters' gradients, or O2's fp32 master gradients made from them; the half weights are
// refreshed from the stepped masters (a no-op below O2).
class MasterGradients final : public StepGradients {
 public:
  explicit MasterGradients(precision::MasterWeights& masters) : masters_(masters) {}
  Collected collect(const std::vector<torch::Tensor>& parameters) override {
    // Indices first: master_grads() releases O2's half gradients.
    auto params = parameters_with_gradients(parameters);
    return {masters_.master_grads(), std::move(params)};
  }
  void weights_stepped() override { masters_.refresh_model(); }

 private:
  precision::MasterWeights& masters_;
};

// Every rank holds every parameter and the optimizer's state for all of them: rank 0 saves them.
class WholeState final : public TrainState {
 public:
  explicit WholeState(TrainStateParts parts)
      : TrainState(parts),
        experts_(ExpertParallel::make(parts_.dist, *parts_.model.module)) {
    auto& masters = parts_.precision.masters();
    optimizer_ = make_optimizer(parts_.config, masters.masters());
    const auto tensors = model_tensors(parts_.precision, parts_.model);
    if (experts_) {
      parts_.dist.attach(experts_->without_experts(tensors),
                         experts_->without_experts(parts_.parameters), {});
      experts_->share_experts(tensors);
    } else {
      parts_.dist.attach(tensors, parts_.parameters, {});
    }
    masters.refresh_model();  // O2: rank 0's masters, broadcast, become every rank's half weights
  }

  NamedTensors tensors() const override {
    auto state = model_tensors(parts_.precision, parts_.model);
    for (auto& named : optimizer_->state()) state.push_back(std::move(named));
    return experts_ ? experts_->whole(std::move(state)) : state;
  }

  void restore(checkpoint::CheckpointReader& reader) override {
    auto whole = reader.assemble();
    if (experts_) {
      whole.model = experts_->local(std::move(whole.model));
      whole.optimizer = experts_->local(std::move(whole.optimizer));
    }
    checkpoint::copy_into(whole.model, model_tensors(parts_.precision, parts_.model), "model",
                          reader.path());
    checkpoint::copy_into(whole.optimizer, optimizer_->state(), "optimizer", reader.path());
    parts_.precision.masters().refresh_model();
  }

  std::string save_path(const std::string& dir, int64_t step) const override {
    // Identical on every rank: rank 0 writes it.
    if (!parts_.dist.is_main()) return "";
    return (std::filesystem::path(dir) / checkpoint::checkpoint_file_name(step)).string();
  }

  Checkpointer::Write write(checkpoint::Checkpoint meta, NamedTensors host) override {
    // The model's tensors come first, then the optimizer's.
    const auto split = host.end() - static_cast<std::ptrdiff_t>(optimizer_->state().size());
    meta.model.assign(std::make_move_iterator(host.begin()), std::make_move_iterator(split));
    meta.optimizer.assign(std::make_move_iterator(split), std::make_move_iterator(host.end()));
    return [meta = std::move(meta), dir = parts_.config.output_dir,
            keep = parts_.config.keep_checkpoints] { checkpoint::save(dir, meta, keep); };
  }

  void step_parts(StepParts& parts) override {
    parts.optimizer = optimizer_.get();
    parts.gradients = experts_ ? &experts_->gradients(gradients_) : &gradients_;
  }

  std::string parallel_note() const override { return experts_ ? experts_->describe() : ""; }

  // The experts' all_to_all needs every rank of their group in each forward.
  bool forward_is_collective() const override { return experts_ != nullptr; }

  std::vector<kernels::FusedPath> fused_paths() const override {
    // O1's half copies are written by the AdamW kernel, for every model.
    if (parts_.precision.half_weights().dtype() != c10::kFloat &&
        parts_.config.optimizer == config::OptimizerKind::adamw) {
      return {kernels::FusedPath::adamw};
    }
    return {};
  }

  std::string note() const override {
    if (parts_.config.zero_stage == 0) return "";
    return fmt::format("zero_stage {} has nothing to shard in a single process: everything stays "
                       "whole",
                       parts_.config.zero_stage);
  }

 private:
  std::unique_ptr<ExpertParallel> experts_;  // null: every rank holds every expert
  MasterGradients gradients_{parts_.precision.masters()};
};

}  // namespace

std::unique_ptr<TrainState> make_whole_state(TrainStateParts parts) {
  return std::make_unique<WholeState>(parts);
}

NamedTensors model_tensors(const precision::PrecisionState& precision, const models::Model& model) {
  auto out = precision.masters().masters();
  for (const auto& item : model.module->named_buffers()) out.emplace_back(item.key(), item.value());
  return out;
}

std::unique_ptr<TrainState> make_train_state(TrainStateParts parts) {
  return parts.dist.zero_stage() > 0 ? make_sharded_state(parts) : make_whole_state(parts);
}

}  // namespace ampt::train
