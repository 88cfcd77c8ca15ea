#include "ampt/train/run.h"

#include "ampt/core/errors.h"
#include "ampt/core/version.h"

#include <ATen/Context.h>
#include <fmt/format.h>

namespace ampt::train {

data::LoaderState Run::restore(const std::string& path, std::string& note) {
  const auto saved = checkpoint::load(path);
  if (saved.optimizer_kind != optimizer_->kind()) {
    throw RuntimeError(fmt::format("checkpoint '{}' was saved with optimizer {}, this run uses {}",
                                   path, saved.optimizer_kind, optimizer_->kind()));
  }
  // Check everything before changing anything, so a bad checkpoint leaves no half-restored run.
  checkpoint::copy_into(saved.model, model_tensors(), "model", path);
  checkpoint::copy_into(saved.optimizer, optimizer_->state(), "optimizer", path);
  std::string stage_note;
  if (const auto stage = config::stage_at(stages_, saved.step, saved.data_epoch); stage != stage_) {
    enter_stage(stage, saved.step, saved.data_epoch, /*announce=*/false);
    precisions_used_ = {policy_.name()};
    stage_note = fmt::format(", precision stage {} of {} ({})", stage + 1, stages_.size(),
                             config::stage_text(stages_[stage]));
  }
  masters_.refresh_model();

  std::string scaler_note;
  if (saved.scaler && scaler_.enabled()) {
    scaler_.load_state(*saved.scaler);
    scaler_note = fmt::format("loss scaler (scale {}, growth tracker {})", saved.scaler->scale,
                              saved.scaler->growth_tracker);
  } else if (saved.scaler) {
    scaler_note = "loss scaler state ignored: this run has no loss scaler";
  } else if (scaler_.enabled()) {
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
  note = fmt::format("Resumed from {} at step {} (epoch {}, batch {}): model, {} optimizer state, "
                     "RNG{}{}",
                     path, saved.step, saved.data_epoch, saved.data_position,
                     saved.optimizer_kind, scaler_note.empty() ? "" : ", " + scaler_note,
                     stage_note);
  return resume_position(saved, note);
}

data::LoaderState Run::resume_position(const checkpoint::Checkpoint& saved, std::string& note) const {
  const data::LoaderState state{saved.data_epoch, saved.data_position};
  const int64_t batch_samples = config_.batch_size * dist_.world_size();
  const int64_t saved_batch_samples = saved.batch_size * saved.world_size;
  if (saved_batch_samples == 0 || saved_batch_samples == batch_samples) return state;
  // Other ranks or another batch_size: a position counts other batches, the samples stay.
  const auto moved =
      data::rebatch(state, saved_batch_samples, batch_samples, splits_.train->size());
  note += fmt::format("; its batches held {} samples ({} ranks x batch_size {}), this run's {} ({} "
                      "x {}): ",
                      saved_batch_samples, saved.world_size, saved.batch_size, batch_samples,
                      dist_.world_size(), config_.batch_size);
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

void Run::save_checkpoint(int64_t steps_done, log::RunSummary& summary) {
  if (!dist_.is_main()) return;  // identical on every rank: rank 0 writes it
  checkpoint::Checkpoint c;
  c.ampt_version = kVersion;
  c.git_revision = kGitRevision;
  c.config = context_.config_text;
  c.step = steps_done;
  c.data_epoch = batches_->state().epoch;
  c.data_position = batches_->state().position;
  c.batch_size = config_.batch_size;
  c.world_size = dist_.world_size();
  c.skipped_steps = static_cast<int64_t>(overflow_steps_.item<double>());
  c.initial_loss = initial_loss_;
  c.model = model_tensors();
  c.optimizer_kind = optimizer_->kind();
  c.optimizer = optimizer_->state();
  if (scaler_.enabled()) c.scaler = scaler_.state();
  c.cpu_rng = at::globalContext().defaultGenerator(c10::Device(c10::kCPU)).get_state();
  if (device_.device.is_cuda()) {
    c.cuda_rng = at::globalContext().defaultGenerator(device_.device).get_state();
  }
  summary.checkpoint = checkpoint::save(config_.output_dir, c, config_.keep_checkpoints);
  observer_.on_checkpoint(summary.checkpoint, steps_done);
}

}  // namespace ampt::train
