#include "ampt/train/run.h"

#include "ampt/config/enum_names.h"
#include "ampt/core/errors.h"
#include "ampt/core/version.h"
#include "ampt/train/base_fingerprint.h"

#include <ATen/Context.h>
#include <fmt/format.h>


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
  const auto objective = config::to_string(config_.objective);
  if (!saved.objective.empty() && saved.objective != objective) {
    // Its data position counts other records, and its optimizer state belongs to another loss.
    throw RuntimeError(fmt::format(
        "checkpoint '{}' was saved by an --objective {} run, this run's is {}: --resume continues "
        "the run that saved it; to start {} from its weights, `ampt export --checkpoint {} --format "
        "hf --out DIR` and give --init_from DIR",
        path, saved.objective, objective, objective, path));
  }
  const auto& optimizer = state_->optimizer();
  if (saved.optimizer_kind != optimizer.kind()) {
    throw RuntimeError(fmt::format("checkpoint '{}' was saved with optimizer {}, this run uses {}",
                                   path, saved.optimizer_kind, optimizer.kind()));
  }
  require_same_base(path, saved, config_.init_from, frozen_base_.fingerprint, config_.base_dtype);
  // Check everything before changing anything, so a bad checkpoint leaves no half-restored run.
  state_->restore(reader);
  std::string stage_note;
  if (const auto stage = policy_.precision().stage_at(saved.step, saved.data_epoch);
      stage != policy_.precision().stage()) {
    enter_stage(stage, saved.step, saved.data_epoch, /*announce=*/false);
    policy_.precision().forget_earlier_stages();
    stage_note = fmt::format(", precision stage {} of {} ({})", stage + 1,
                             policy_.precision().stages().size(),
                             config::stage_text(policy_.precision().stages()[stage]));
  }

  std::string scaler_note;
  if (saved.scaler && policy_.precision().scaler().enabled()) {
    policy_.precision().scaler().load_state({saved.scaler->scale, saved.scaler->growth_tracker,
                        saved.scaler->hysteresis});
    scaler_note = fmt::format("loss scaler (scale {}, growth tracker {})", saved.scaler->scale,
                              saved.scaler->growth_tracker);
  } else if (saved.scaler) {
    scaler_note = "loss scaler state ignored: this run has no loss scaler";
  } else if (policy_.precision().scaler().enabled()) {
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
  progress_.overflow_steps.fill_(static_cast<double>(saved.skipped_steps));
  progress_.start_step = saved.step;
  progress_.initial_loss = saved.initial_loss;
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
  const int64_t batch_samples = progress_.batch_size * dist_.world_size();
  const int64_t saved_batch_samples = saved.batch_size * saved.world_size;
  if (saved_batch_samples == 0 || saved_batch_samples == batch_samples) return state;
  // Other ranks or another batch_size: a position counts other batches, the samples stay.
  const auto moved =
      data::rebatch(state, saved_batch_samples, batch_samples, splits_.train->size());
  note += fmt::format("; its batches held {} samples ({} ranks x batch_size {}), this run's {} ({} "
                      "x {}): ",
                      saved_batch_samples, saved.world_size, saved.batch_size, batch_samples,
                      dist_.world_size(), progress_.batch_size);
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

checkpoint::Checkpoint Run::checkpoint_meta(int64_t steps_done) const {
  checkpoint::Checkpoint c;
  c.ampt_version = kVersion;
  c.git_revision = kGitRevision;
  c.config = context_.config_text;
  c.objective = config::to_string(config_.objective);
  c.step = steps_done;
  c.data_epoch = progress_.batches->state().epoch;
  c.data_position = progress_.batches->state().position;
  c.batch_size = progress_.batch_size;
  c.world_size = dist_.world_size();
  c.skipped_steps = static_cast<int64_t>(progress_.overflow_steps.item<double>());
  c.initial_loss = progress_.initial_loss;
  c.optimizer_kind = state_->optimizer().kind();
  c.base_model = config_.init_from;
  c.base_fingerprint = frozen_base_.fingerprint;
  c.reference_data = reference_data_;
  if (policy_.precision().scaler().enabled()) {
    const auto state = policy_.precision().scaler().state();
    c.scaler = checkpoint::SavedScaler{state.scale, state.growth_tracker, state.hysteresis};
  }
  c.cpu_rng = at::globalContext().defaultGenerator(c10::Device(c10::kCPU)).get_state();
  if (device_.device.is_cuda()) {
    c.cuda_rng = at::globalContext().defaultGenerator(device_.device).get_state();
  }
  return c;
}

void Run::save_checkpoint(int64_t steps_done, log::RunSummary& summary, bool final) {
  // Every rank asks for the tensors: under expert parallelism that gathers the experts.
  auto tensors = state_->tensors();
  auto path = state_->save_path(config_.output_dir, steps_done);
  if (path.empty()) return;
  checkpointer_.save(
      steps_done, std::move(path), std::move(tensors),
      [&](NamedTensors host) {
        return state_->write(checkpoint_meta(steps_done), std::move(host));
      },
      summary, final);
}

}  // namespace ampt::train
