// What the training loop reports while it runs: plain data, formatted by the observers in this folder.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ampt::log {

// Fixed facts about a run, reported once before the first step.
struct RunInfo {
  std::string device;              // "cpu", "cuda:0 (NVIDIA H100 80GB HBM3)"
  std::string device_reason;       // why this device was chosen
  std::string model;
  std::string architecture;        // the model's resolved dimensions
  std::string pretrained;          // where init_from's weights came from; empty: random init
  int64_t parameters = 0;
  std::string dataset;
  std::string data_description;    // what the dataset holds and how it was split
  bool language_model = false;     // throughput in tokens rather than samples
  double peak_flops = 0.0;         // the device's dense peak for this precision; 0 if unknown
  std::string precision;           // "BF16", "FP16", "FP32"
  std::string precision_source;    // where mixed_precision was set: "default", "flag ..."
  std::string precision_reason;    // why `auto` chose it, or why a request was replaced
  bool precision_fell_back = false;  // the requested precision could not be used
  std::string precision_explanation;
  std::string opt_level;           // "O0", "O1", "O2"
  std::vector<std::string> precision_schedule;  // stages as written ("fp32:500"); empty: none
  int64_t precision_stage = 0;     // 1-based stage the run starts in (0: no schedule)
  std::vector<std::string> compat_report;  // O2/fp16 runs: fp32 modules and risky ops, one per line
  bool loss_scaling = false;
  double init_scale = 0.0;
  double growth_factor = 0.0;
  double backoff_factor = 0.0;
  int64_t growth_interval = 0;
  std::string scaler_rules;         // "torch", "deepspeed"
  double static_scale = 0.0;        // > 0: a fixed loss scale
  int64_t hysteresis = 1;
  bool consecutive_hysteresis = false;
  double min_loss_scale = 0.0;      // 0: none
  double max_loss_scale = 0.0;      // 0: none
  int64_t max_consecutive_skips = 0;  // 0: never stop
  bool deterministic = false;
  bool autocast_cache = true;
  int64_t seed = 0;
  std::string optimizer;
  int64_t batch_size = 0;
  int64_t grad_accum_steps = 0;
  int64_t total_steps = 0;
  int64_t steps_per_epoch = 0;
  double peak_lr = 0.0;
  double min_lr = 0.0;
  int64_t warmup_steps = 0;
  double max_grad_norm = 0.0;
  int64_t start_step = 0;       // optimizer steps already done (0 unless resumed)
  std::string resume_note;      // what a resume restored, or why it started fresh; empty if neither
  std::vector<std::string> speed_notes;  // TF32, channels-last, CUDA graphs: on, or why not
  std::string distributed;      // the ranks and the global batch; empty in a single process
  // What the run changed to be able to train (a batch fitted to a small split), one line each.
  std::vector<std::string> warnings;
  std::string zero;             // ZeRO's stage and bytes per parameter per rank; empty without
  // LoRA's adapters: rank, targets, trainable and frozen parameter counts; empty without.
  std::string lora;
  // A preference objective: its loss, settings and reference model; empty for token
  // cross-entropy.
  std::string objective;
};

// The state at a logged optimizer step (values read from the device only on such steps).
struct StepReport {
  int64_t step = 0;          // 1-based optimizer step
  int64_t total_steps = 0;
  int64_t epoch = 0;         // 0-based
  double loss = 0.0;         // mean over this step's micro-batches
  double lr = 0.0;
  double grad_norm = 0.0;    // before clipping, after unscaling
  double samples_per_sec = 0.0;  // since the previous logged step
  double tokens_per_sec = 0.0;   // samples/s times tokens per sample
  double mfu = 0.0;              // model FLOPs utilisation, 0 when the device's peak is unknown
  int64_t peak_memory_bytes = 0;  // the run's peak so far, as in RunSummary
  bool loss_scaling = false;
  double scale = 1.0;
  int64_t growth_tracker = 0;
  int64_t overflows = 0;     // steps whose gradients held inf/NaN, so far
  int64_t skipped_steps = 0; // optimizer steps not applied, so far
  int64_t hysteresis = -1;   // deepspeed rules: overflows left before a backoff; -1 otherwise
  // Of this step's non-zero fp32 gradient values (scaled, as backward left them), the fraction
  // that become 0 in the half dtype; -1 when the run has no half dtype (fp32).
  double grad_underflow = -1.0;
  // The objective's figures (preference runs: TRL's rewards/chosen, ...), means per pair.
  std::vector<std::pair<std::string, double>> figures;
};

// A precision_schedule stage begins (before optimizer step `step` + 1).
struct PrecisionSwitch {
  int64_t step = 0;        // optimizer steps done before the switch
  int64_t epoch = 0;
  std::string from;        // "FP32", "BF16", "FP16"
  std::string to;
  int64_t stage = 0;       // 1-based
  int64_t stages = 0;
  std::string stage_text;  // the stage as the schedule writes it: "bf16:2000"
  bool loss_scaling = false;  // the new stage has the loss scaler (restarting at init_scale)
  double init_scale = 0.0;
  std::string reason;      // why the device's precision differs from the stage's, if it does
};

// A pass over (part of) the validation split, under the training precision, without gradients.
struct EvalReport {
  int64_t step = 0;
  int64_t epoch = 0;         // 0-based, as in StepReport
  double loss = 0.0;
  double accuracy = -1.0;    // classifiers, in [0, 1]; -1 for language models
  double perplexity = -1.0;  // language models: exp(loss); -1 for classifiers
  int64_t batches = 0;
  // The objective's figures on the validation split, as in StepReport.
  std::vector<std::pair<std::string, double>> figures;
};

// A checkpoint save that has ended, written or not. Reported by the training thread once the
// background write is over.
struct CheckpointReport {
  int64_t step = 0;
  std::string path;
  int64_t bytes = 0;             // the file's size
  double pause_seconds = 0.0;    // training stopped: the snapshot, and waiting for an earlier write
  double wait_seconds = 0.0;     // the part of the pause spent waiting for an earlier write
  double write_seconds = 0.0;    // the background write: records, fsync, rename
  std::string error;             // why it was not saved; empty when it was
};

// --profile's census of one optimizer step: what it asks of the device (train/step_census.h says
// how each figure is counted), the same on a CPU as on a GPU.
struct StepCensusReport {
  int64_t step = 0;
  int64_t operators = 0;              // that do device work
  int64_t conversions = 0;            // copies between dtypes
  int64_t conversion_bytes = 0;       // their bytes read and written
  int64_t parameter_conversions = 0;  // of those, of a parameter or a gradient into one
  // Of the conversions, those inside ampt's own operations (one kernel on a GPU, ATen's ops on a
  // CPU), and per operation how many: the optimizer's half copies, the fp32 weight gradients.
  int64_t ampt_conversions = 0;
  int64_t ampt_conversion_bytes = 0;
  int64_t ampt_parameter_conversions = 0;
  std::map<std::string, int64_t> ampt_conversion_ops;
  int64_t host_syncs = 0;             // calls that make a GPU wait for the host
  int64_t autograd_nodes = 0;         // backward nodes run
};

struct RunSummary {
  std::string precision;
  bool loss_scaling = false;
  int64_t steps = 0;           // optimizer steps done, counting those before a resume
  int64_t steps_this_run = 0;
  double initial_loss = 0.0;
  double final_loss = 0.0;
  // An objective's figures (a preference run's rewards/accuracies, GRPO's reward, ...) at the
  // first and the last step logged in this run.
  std::vector<std::pair<std::string, double>> initial_figures;
  std::vector<std::pair<std::string, double>> final_figures;
  int64_t skipped_steps = 0;
  double initial_scale = 0.0;
  double final_scale = 0.0;
  // Steady state, as the metrics lines measure it: the samples of the logged intervals after
  // the first (which holds the warm-up) over their training time, evaluation and checkpoint
  // pauses excluded. A run with one logged interval reports that one.
  double samples_per_sec = 0.0;
  double tokens_per_sec = 0.0;
  int64_t steady_first_step = 0;  // the steps those figures cover
  int64_t steady_last_step = 0;
  // Wall time, and its parts: building the run (device, data, model, resume), the steps,
  // evaluation, and training paused for checkpoints (snapshots, waits for writes, the final save).
  double seconds = 0.0;
  double startup_seconds = 0.0;
  double training_seconds = 0.0;
  double eval_seconds = 0.0;
  double checkpoint_seconds = 0.0;
  int64_t checkpoints_saved = 0;
  int64_t checkpoint_bytes = 0;          // written by those saves
  double checkpoint_write_seconds = 0.0;  // their background writes, alongside training
  double final_val_loss = -1.0;   // -1 when there is no validation split
  // A run from pretrained weights (init_from): their validation loss before the first step; -1
  // otherwise.
  double initial_val_loss = -1.0;
  int64_t peak_memory_bytes = 0;
  std::string peak_memory_kind;   // "CUDA allocator peak" or "process peak RSS"
  std::string checkpoint;         // the last checkpoint written, empty if none
  bool final_save_skipped = false;  // --save_final=false: training finished without a save
  int stop_signal = 0;            // the signal that stopped the run early, 0 if it finished
};

// Receives the run's events; implemented by the console, progress and metrics writers.
class Observer {
 public:
  virtual ~Observer() = default;
  // Before the start: text being tokenized, input bytes done of total (done == total: finished).
  virtual void on_data_progress(int64_t done, int64_t total, double elapsed_seconds) {}
  virtual void on_start(const RunInfo& info) {}
  // Every optimizer step, without values: cheap enough for a progress bar.
  virtual void on_progress(int64_t step, int64_t total_steps, double elapsed_seconds) {}
  virtual void on_step(const StepReport& report) {}
  virtual void on_eval(const EvalReport& report) {}
  virtual void on_precision_switch(const PrecisionSwitch& change) {}
  virtual void on_checkpoint(const CheckpointReport& report) {}
  // --profile wrote its trace, operator table and step census for optimizer steps first..last.
  virtual void on_profile(int64_t first, int64_t last, const std::string& trace,
                          const std::string& table, const std::string& census) {}
  // --profile counted one of its steps.
  virtual void on_census(const StepCensusReport& census) {}
  // A step skipped for a non-finite loss, gradient or weight; `what` names the first offender.
  virtual void on_nonfinite(int64_t step, const std::string& what) {}
  virtual void on_end(const RunSummary& summary) {}
};

}  // namespace ampt::log

namespace ampt::log {

// Forwards every event to each observer in order.
class ObserverList final : public Observer {
 public:
  void add(Observer& observer) { observers_.push_back(&observer); }
  void on_data_progress(int64_t done, int64_t total, double elapsed_seconds) override {
    for (auto* o : observers_) o->on_data_progress(done, total, elapsed_seconds);
  }
  void on_start(const RunInfo& info) override {
    for (auto* o : observers_) o->on_start(info);
  }
  void on_progress(int64_t step, int64_t total_steps, double elapsed_seconds) override {
    for (auto* o : observers_) o->on_progress(step, total_steps, elapsed_seconds);
  }
  void on_step(const StepReport& report) override {
    for (auto* o : observers_) o->on_step(report);
  }
  void on_eval(const EvalReport& report) override {
    for (auto* o : observers_) o->on_eval(report);
  }
  void on_precision_switch(const PrecisionSwitch& change) override {
    for (auto* o : observers_) o->on_precision_switch(change);
  }
  void on_checkpoint(const CheckpointReport& report) override {
    for (auto* o : observers_) o->on_checkpoint(report);
  }
  void on_profile(int64_t first, int64_t last, const std::string& trace,
                  const std::string& table, const std::string& census) override {
    for (auto* o : observers_) o->on_profile(first, last, trace, table, census);
  }
  void on_census(const StepCensusReport& census) override {
    for (auto* o : observers_) o->on_census(census);
  }
  void on_nonfinite(int64_t step, const std::string& what) override {
    for (auto* o : observers_) o->on_nonfinite(step, what);
  }
  void on_end(const RunSummary& summary) override {
    for (auto* o : observers_) o->on_end(summary);
  }

 private:
  std::vector<Observer*> observers_;
};

}  // namespace ampt::log
