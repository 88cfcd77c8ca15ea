#include "ampt/train/run.h"

#include "ampt/core/errors.h"
#include "ampt/core/version.h"
#include "ampt/train/base_fingerprint.h"

#include <ATen/Context.h>
#include <fmt/format.h>

#include <filesystem>
#include <iterator>

namespace ampt::train {
namespace {

// ", 2 shards re-cut for 4 ranks" when a sharded checkpoint's world size differs from this run's.
std::string shards_note_for(const checkpoint::Checkpoint& saved, bool sharded, int64_t world) {
  if (!sharded) return "";
  if (saved.world_size == world) return fmt::format(" ({} shards)", world);
  return fmt::format(" ({} shards re-cut for {} rank{})", saved.world_size, world, world > 1 ? "s" : "");
}

}  // namespace

data::LoaderState Run::restore(const std::string& path, std::string& note) {
  const auto begun = Clock::now();
  checkpoint::CheckpointReader reader(path);
  const auto& saved = reader.meta();
  if (saved.optimizer_kind != optimizer_->kind()) {
    throw RuntimeError(fmt::format("checkpoint '{}' was saved with optimizer {}, this run uses {}",
                                   path, saved.optimizer_kind, optimizer_->kind()));
  }
  require_same_base(path, saved, config_.init_from, base_fingerprint_);
  // Check everything before changing anything, so a bad checkpoint leaves no half-restored run.
  if (dist_.zero()) {
    restore_shards(reader);
  } else {
    const auto whole = reader.assemble();
    checkpoint::copy_into(whole.model, model_tensors(), "model", path);
    checkpoint::copy_into(whole.optimizer, optimizer_->state(), "optimizer", path);
  }
  std::string stage_note;
  if (const auto stage = precision_.stage_at(saved.step, saved.data_epoch);
      stage != precision_.stage()) {
    enter_stage(stage, saved.step, saved.data_epoch, /*announce=*/false);
    precision_.forget_earlier_stages();
    stage_note = fmt::format(", precision stage {} of {} ({})", stage + 1, precision_.stages().size(),
                             config::stage_text(precision_.stages()[stage]));
  }
  if (!dist_.zero()) precision_.masters().refresh_model();

  std::string scaler_note;
  if (saved.scaler && precision_.scaler().enabled()) {
    precision_.scaler().load_state({saved.scaler->scale, saved.scaler->growth_tracker,
                        saved.scaler->hysteresis});
    scaler_note = fmt::format("loss scaler (scale {}, growth tracker {})", saved.scaler->scale,
                              saved.scaler->growth_tracker);
  } else if (saved.scaler) {
    scaler_note = "loss scaler state ignored: this run has no loss scaler";
  } else if (precision_.scaler().enabled()) {
    scaler_note = fmt::format("loss scaler starts at init_scale {}: the checkpoint's run had none",
                              config_.grad_scaler_init);
  }
  // A Generator is a handle: this copy sets the state of the process-wide default generator.
  auto cpu_generator = at::globalContext().defaultGenerator(c10::Device(c10::kCPU));
  cpu_generator.set_state(saved.cpu_rng);
  if (saved.cuda_rng.defined() && device_.device.is_cuda()) {
    auto cuda_generator = at::globalContext().defaultGenerator(device_.device);
    cuda_generator.set_state(saved.cuda_rng);
  }
  overflow_steps_.fill_(static_cast<double>(saved.skipped_steps));
  start_step_ = saved.step;
  initial_loss_ = saved.initial_loss;
  note = fmt::format("Resumed from {} at step {} (epoch {}, batch {}) in {:.2f} s: model, {} "
                     "optimizer state{}, RNG{}{}",
                     reader.path(), saved.step, saved.data_epoch, saved.data_position,
                     seconds_since(begun), saved.optimizer_kind,
                     shards_note_for(saved, checkpoint::is_sharded(reader.path()), dist_.world_size()),
                     scaler_note.empty() ? "" : ", " + scaler_note, stage_note);
  return resume_position(saved, note);
}

data::LoaderState Run::resume_position(const checkpoint::Checkpoint& saved, std::string& note) const {
  const data::LoaderState state{saved.data_epoch, saved.data_position};
  const int64_t batch_samples = batch_size_ * dist_.world_size();
  const int64_t saved_batch_samples = saved.batch_size * saved.world_size;
  if (saved_batch_samples == 0 || saved_batch_samples == batch_samples) return state;
  // Other ranks or another batch_size: a position counts other batches, the samples stay.
  const auto moved =
      data::rebatch(state, saved_batch_samples, batch_samples, splits_.train->size());
  note += fmt::format("; its batches held {} samples ({} ranks x batch_size {}), this run's {} ({} "
                      "x {}): ",
                      saved_batch_samples, saved.world_size, saved.batch_size, batch_samples,
                      dist_.world_size(), batch_size_);
  const int64_t from = moved.state.position * batch_samples;
  if (moved.state.epoch != saved.data_epoch) {
    note += fmt::format("the data continues at epoch {} (the checkpoint stopped at sample {} of "
                        "epoch {}, less than a batch before its end)",
                        moved.state.epoch, moved.sample, saved.data_epoch);
  } else if (moved.samples_read_again > 0) {
    note += fmt::format("the data continues at sample {} of epoch {} (the checkpoint stopped at "
                        "{}; rounded down to a whole batch, {} samples are read again)",
                        from, moved.state.epoch, moved.sample, moved.samples_read_again);
  } else {
    note += fmt::format("the data continues at sample {} of epoch {}", from, moved.state.epoch);
  }
  return moved.state;
}

NamedTensors Run::state_tensors() const {
  auto state = model_tensors();
  for (auto& named : optimizer_->state()) state.push_back(std::move(named));
  return state;
}

checkpoint::Checkpoint Run::checkpoint_meta(int64_t steps_done) const {
  checkpoint::Checkpoint c;
  c.ampt_version = kVersion;
  c.git_revision = kGitRevision;
  c.config = context_.config_text;
  c.step = steps_done;
  c.data_epoch = batches_->state().epoch;
  c.data_position = batches_->state().position;
  c.batch_size = batch_size_;
  c.world_size = dist_.world_size();
  c.skipped_steps = static_cast<int64_t>(overflow_steps_.item<double>());
  c.initial_loss = initial_loss_;
  c.optimizer_kind = optimizer_->kind();
  c.base_model = config_.init_from;
  c.base_fingerprint = base_fingerprint_;
  if (precision_.scaler().enabled()) {
    const auto state = precision_.scaler().state();
    c.scaler = checkpoint::SavedScaler{state.scale, state.growth_tracker, state.hysteresis};
  }
  c.cpu_rng = at::globalContext().defaultGenerator(c10::Device(c10::kCPU)).get_state();
  if (device_.device.is_cuda()) {
    c.cuda_rng = at::globalContext().defaultGenerator(device_.device).get_state();
  }
  return c;
}

void Run::save_checkpoint(int64_t steps_done, log::RunSummary& summary, bool final) {
  // Identical on every rank: rank 0 writes it; under ZeRO every rank writes its shard.
  if (!dist_.is_main() && !dist_.zero()) return;
  const std::filesystem::path dir(config_.output_dir);
  if (dist_.zero()) {
    checkpointer_.save(
        steps_done, (dir / checkpoint::checkpoint_dir_name(steps_done)).string(), shard_tensors(),
        [&](NamedTensors host) { return shard_write(checkpoint_meta(steps_done), host); }, summary,
        final);
    return;
  }
  checkpointer_.save(
      steps_done, (dir / checkpoint::checkpoint_file_name(steps_done)).string(), state_tensors(),
      [&](NamedTensors host) -> Checkpointer::Write {
        auto c = checkpoint_meta(steps_done);
        // The model's tensors come first, then the optimizer's.
        const auto split = host.end() - static_cast<std::ptrdiff_t>(optimizer_->state().size());
        c.model.assign(std::make_move_iterator(host.begin()), std::make_move_iterator(split));
        c.optimizer.assign(std::make_move_iterator(split), std::make_move_iterator(host.end()));
        return [c = std::move(c), dir = config_.output_dir, keep = config_.keep_checkpoints] {
          checkpoint::save(dir, c, keep);
        };
      },
      summary, final);
}

}  // namespace ampt::train
