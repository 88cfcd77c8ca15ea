#include "ampt/config/options.h"

#include "ampt/config/dataset_spec.h"
#include "ampt/config/fp8_layers.h"
#include "ampt/config/precision_schedule.h"
#include "ampt/config/report_to.h"
#include "ampt/config/step_range.h"
#include "ampt/core/json_reader.h"

#include <algorithm>
#include <stdexcept>

namespace ampt::config {

namespace {

bool is_json_object(std::string_view text) {
  if (text.empty()) return true;
  try {
    return parse_json(text).kind == JsonValue::Kind::object;
  } catch (const JsonError&) {
    return false;
  }
}

std::vector<Option> build_table() {
  const auto at_least_0 = Range::at_least(0);
  const auto at_least_1 = Range::at_least(1);
  const auto positive = Range::above(0);
  const auto unit_open = Range::interval(0, false, 1, false);
  const auto unit_half_open = Range::interval(0, true, 1, false);

  using C = Config;
  return {
      string_option("config", "", &C::config_file, false, "PATH",
                    "YAML file to read settings from (flag or AMPT_CONFIG only)"),

      // run
      enum_option("device", "run.device", &C::device,
                  "Where to train; auto picks cuda when a GPU is visible, else cpu"),
      string_option("output_dir", "run.output_dir", &C::output_dir, true, "DIR",
                    "Directory for checkpoints, summary.json and the --report_to files (an earlier "
                    "run's are kept)"),
      integer_option("seed", "run.seed", &C::seed, at_least_0,
                     "Seed for weight init, data generation and shuffling"),
      integer_option("log_every", "run.log_every", &C::log_every, at_least_1,
                     "Log loss, grad norm and loss scale every N optimizer steps"),
      integer_option("eval_every", "run.eval_every", &C::eval_every, at_least_0,
                     "Evaluate on the validation split every N steps (0: only at the end)"),
      integer_option("eval_batches", "run.eval_batches", &C::eval_batches, at_least_0,
                     "Validation batches per evaluation; 0 evaluates the whole split"),
      integer_option("eval_batch_size", "run.eval_batch_size", &C::eval_batch_size, at_least_0,
                     "Samples per validation batch on each rank (0: batch_size); the whole split's "
                     "val loss does not depend on it"),
      list_option(explained_string_option(
          "report_to", "run.report_to", &C::report_to, report_to_problem,
          std::string(kReportToExpected), "LIST",
          "Metric files rank 0 writes (comma-separated; YAML a list): jsonl (metrics.jsonl), "
          "tensorboard (tb/ event files), csv (metrics.csv as Lightning's CSVLogger), plot "
          "(run.svg at the end, with jsonl), all, or none")),
      bool_option("deterministic", "run.deterministic", &C::deterministic,
                  "Deterministic algorithms only, everything seeded: two runs give identical "
                  "losses"),
      bool_option("debug", "run.debug", &C::debug,
                  "Print the resolved configuration at startup and full torch error context on failure"),
      checked_string_option(
          "profile", "run.profile", &C::profile,
          [](std::string_view text) { return text.empty() || parse_step_range(text).has_value(); },
          std::string(kStepRangeExpected), "STEPS",
          "Trace these optimizer steps (e.g. 10-12) with LibTorch's profiler: a Chrome/Perfetto "
          "trace and an operator table in output_dir, ampt's step phases as named ranges"),

      // checkpoint
      integer_option("save_every", "checkpoint.save_every", &C::save_every, at_least_0,
                     "Save a checkpoint every N optimizer steps; 0 saves only at the end and on "
                     "preemption"),
      bool_option("save_final", "checkpoint.save_final", &C::save_final,
                  "Save a checkpoint when training finishes; false saves only save_every's and, "
                  "on preemption, the one a requeued job resumes from (HF's save_strategy=no)"),
      integer_option("keep_checkpoints", "checkpoint.keep", &C::keep_checkpoints, at_least_1,
                     "Keep the newest K checkpoints in output_dir, delete older ones"),
      string_option("resume", "checkpoint.resume", &C::resume, false, "auto|PATH",
                    "Resume from a checkpoint: auto = output_dir's latest (fresh start if none)"),
      choice_option("preempt_signal", "checkpoint.preempt_signal", &C::preempt_signal,
                    {"SIGUSR1", "SIGUSR2", "SIGHUP", "SIGTERM"},
                    "Signal (besides SIGTERM) that means: finish the step, save, exit 75 for "
                    "requeue"),

      // amp
      enum_option("mixed_precision", "amp.mixed_precision", &C::mixed_precision,
                  "Autocast dtype for the forward pass; no trains in fp32; auto picks bf16 where "
                  "the device computes it natively (GPUs of compute capability 8.0+, CPUs with "
                  "avx512_bf16 or amx_bf16), else fp16 with the loss scaler (older GPUs) or fp32 "
                  "(other CPUs)"),
      bool_option("strict_precision", "amp.strict_precision", &C::strict_precision,
                  "Stop with an error instead of falling back when the device lacks the "
                  "requested precision (bf16 on a pre-Ampere GPU)"),
      enum_option("amp_opt_level", "amp.opt_level", &C::amp_opt_level,
                  "O0: cast nothing (fp32 reference); O1: autocast allow-listed ops; O2: half "
                  "weights and activations, fp32 norms and master weights"),
      bool_option("autocast_cache", "amp.autocast_cache", &C::autocast_cache,
                  "Reuse autocast's low-precision weight copies within a forward pass"),
      bool_option("half_weights", "amp.half_weights", &C::half_weights,
                  "O1: keep a bf16/fp16 copy of each weight the matmuls read, written by the "
                  "optimizer step in the pass that updates the fp32 weight, instead of autocast "
                  "casting every weight in every forward (not under ZeRO-3, whose blocks are "
                  "gathered in the compute dtype); false: autocast's casts, for comparison"),
      bool_option("fp32_weight_grads", "amp.fp32_weight_grads", &C::fp32_weight_grads,
                  "With half_weights: weight gradients accumulated in fp32 straight from the GEMM "
                  "(fp32-output cuBLAS), as Megatron-LM's gradient_accumulation_fusion; on a CPU "
                  "oneDNN's half GEMM added into the fp32 gradient (autocast's values); false: "
                  "half gradients cast to fp32, the values of half_weights false"),
      list_option(explained_string_option(
          "keep_fp32_modules", "amp.keep_fp32_modules", &C::keep_fp32_modules,
          module_patterns_problem, std::string(kModulePatternsExpected), "PATTERNS",
          "Modules (name patterns, comma-separated; YAML a list) that always run and store in "
          "fp32")),
      list_option(explained_string_option(
          "precision_schedule", "amp.precision_schedule", &C::precision_schedule,
          schedule_problem, std::string(kScheduleExpected), "STAGES",
          "Precision stages, e.g. fp32:500,bf16 (YAML a list of {until_step|until_epoch, "
          "precision}); the last stage runs to the end")),

      enum_option("fp8_scaling", "amp.fp8_scaling", &C::fp8_scaling,
                  "fp8 scale factors: delayed (from an amax history of earlier steps, as "
                  "TransformerEngine), current (from each tensor's own amax) or rowwise (one "
                  "scale per row from its own amax, e4m3 throughout)"),
      list_option(explained_string_option(
          "fp8_layers", "amp.fp8_layers", &C::fp8_layers, fp8_layers_problem,
          std::string(kFp8LayersExpected), "auto|all|PATTERNS",
          "Linear layers run in fp8: auto (those whose GEMMs measured faster in fp8 than bf16 "
          "at startup), all, or layer-name patterns (h.*.mlp.c_fc,head; YAML a list)")),
      integer_option("fp8_amax_history_len", "amp.fp8_amax_history_len", &C::fp8_amax_history_len,
                     at_least_1, "Steps of amax history each fp8 tensor keeps (delayed scaling)"),
      enum_option("fp8_amax_compute_algo", "amp.fp8_amax_compute_algo",
                  &C::fp8_amax_compute_algo,
                  "Amax a delayed fp8 scale is taken from: the history's max or its most recent"),
      integer_option("fp8_margin", "amp.fp8_margin", &C::fp8_margin, at_least_0,
                     "fp8 scale = fp8_max / amax / 2^margin: headroom in powers of two"),

      // perf
      bool_option("grad_ckpt", "perf.grad_ckpt", &C::grad_ckpt,
                  "Recompute each transformer block in backward instead of keeping its "
                  "activations (GPT models)"),
      bool_option("cuda_graphs", "perf.cuda_graphs", &C::cuda_graphs,
                  "Capture the whole training step as a CUDA graph and replay it (CUDA)"),
      auto_switch_option("fused_kernels", "perf.fused_kernels", &C::fused_kernels,
                         "Fused kernels for GPTs and Llamas: the head and cross-entropy in row "
                         "chunks (never the whole logits), each residual add with the LayerNorm "
                         "after it, the attention as one operation, the MLP recomputing its GELU "
                         "in backward on a GPU; false runs the plain ATen ops; auto (default): "
                         "fused, except on a GPU where a forward and backward of the run's own "
                         "batch measures the plain ops faster at startup and they fit its memory"),
      bool_option("gemm_epilogues", "perf.gemm_epilogues", &C::gemm_epilogues,
                  "With --fused_kernels on a GPU in bf16/fp16: the GPT MLP's bias + GELU, and in "
                  "backward the GELU's gradient and every Linear's bias gradient, inside the "
                  "cuBLASLt GEMMs instead of separate passes; false keeps the passes, for "
                  "comparison"),
      bool_option("allow_tf32", "perf.allow_tf32", &C::allow_tf32,
                  "Let fp32 matmuls and convolutions use TF32 tensor cores (CUDA, Ampere+)"),
      bool_option("channels_last", "perf.channels_last", &C::channels_last,
                  "Keep the CNN's weights and activations channels-last (NHWC)"),

      // scaler
      float_option("grad_scaler_init", "scaler.init_scale", &C::grad_scaler_init, positive,
                   "Initial loss scale of the fp16 grad scaler"),
      float_option("grad_scaler_growth_factor", "scaler.growth_factor",
                   &C::grad_scaler_growth_factor, Range::above(1),
                   "Multiply the loss scale by this after growth_interval clean steps"),
      float_option("grad_scaler_backoff", "scaler.backoff_factor", &C::grad_scaler_backoff,
                   unit_open, "Multiply the loss scale by this when grads overflow"),
      integer_option("grad_scaler_growth_interval", "scaler.growth_interval",
                     &C::grad_scaler_growth_interval, at_least_1,
                     "Overflow-free steps before the loss scale grows"),
      bool_option("grad_scaler_enabled", "scaler.enabled", &C::grad_scaler_enabled,
                  "Use loss scaling when the precision needs it (fp16); false trains fp16 unscaled"),
      enum_option("grad_scaler_rules", "scaler.rules", &C::grad_scaler_rules,
                  "Dynamic scale rules: torch (torch.amp.GradScaler, bit for bit) or deepspeed "
                  "(DynamicLossScaler, with hysteresis)"),
      float_option("loss_scale", "scaler.loss_scale", &C::loss_scale, at_least_0,
                   "A fixed loss scale, never updated; 0 means dynamic (DeepSpeed's convention)"),
      integer_option("hysteresis", "scaler.hysteresis", &C::hysteresis, at_least_1,
                     "Overflows tolerated before the scale backs off (deepspeed rules; 1: every "
                     "overflow backs off)"),
      bool_option("consecutive_hysteresis", "scaler.consecutive_hysteresis",
                  &C::consecutive_hysteresis,
                  "Refill the hysteresis after every clean step, not only when the scale grows "
                  "(deepspeed rules)"),
      float_option("min_loss_scale", "scaler.min_loss_scale", &C::min_loss_scale, at_least_0,
                   "Floor of the dynamic scale; an overflow at the floor stops the run (0: none)"),
      float_option("max_loss_scale", "scaler.max_loss_scale", &C::max_loss_scale, at_least_0,
                   "Ceiling of the dynamic scale, as Apex's max_loss_scale (0: none)"),

      // training
      integer_option("batch_size", "training.batch_size", &C::batch_size, at_least_1,
                     "Samples per micro-batch (per forward/backward pass)"),
      integer_option("grad_accum_steps", "training.grad_accum_steps", &C::grad_accum_steps,
                     at_least_1, "Micro-batches accumulated per optimizer step"),
      integer_option("target_effective_batch_size", "training.target_effective_batch_size",
                     &C::target_effective_batch_size, at_least_0,
                     "Samples per optimizer step over all ranks: sets grad_accum_steps to it / "
                     "(batch_size x ranks), which must divide it (0: grad_accum_steps as given)"),
      integer_option("max_steps", "training.max_steps", &C::max_steps, at_least_0,
                     "Optimizer steps to train for; 0 trains for `epochs` instead"),
      integer_option("epochs", "training.epochs", &C::epochs, at_least_1,
                     "Full passes over the dataset when max_steps is 0"),
      enum_option("optimizer", "training.optimizer", &C::optimizer,
                  "Optimizer; adamw uses decoupled weight decay"),
      float_option("lr", "training.lr", &C::lr, positive,
                   "Peak learning rate, reached after warmup"),
      float_option("min_lr_ratio", "training.min_lr_ratio", &C::min_lr_ratio,
                   Range::interval(0, true, 1, true), "Cosine decay ends at lr * min_lr_ratio"),
      float_option("weight_decay", "training.weight_decay", &C::weight_decay, at_least_0,
                   "Weight decay coefficient (decoupled for adamw)"),
      integer_option("warmup_steps", "training.warmup_steps", &C::warmup_steps, at_least_0,
                     "Linear learning-rate warmup steps"),
      float_option("max_grad_norm", "training.max_grad_norm", &C::max_grad_norm, at_least_0,
                   "Clip the global grad norm (after unscaling) to this; 0 disables"),
      integer_option("max_consecutive_skips", "training.max_consecutive_skips",
                     &C::max_consecutive_skips, at_least_0,
                     "Save and stop with a diagnosis after this many skipped steps in a row (0: "
                     "never)"),
      float_option("momentum", "training.momentum", &C::momentum, unit_half_open, "SGD momentum"),
      float_option("adam_beta1", "training.adam_beta1", &C::adam_beta1, unit_half_open,
                   "AdamW first-moment decay (beta1)"),
      float_option("adam_beta2", "training.adam_beta2", &C::adam_beta2, unit_half_open,
                   "AdamW second-moment decay (beta2)"),
      float_option("adam_eps", "training.adam_eps", &C::adam_eps, positive,
                   "AdamW denominator epsilon"),

      enum_option("objective", "training.objective", &C::objective,
                  "What training minimises: lm = token cross-entropy (pretraining, SFT); on "
                  "preference records (prompt, chosen, rejected): dpo (DPO's sigmoid loss), ipo, "
                  "simpo (reference-free, length-normalised) or orpo (odds ratio plus the chosen "
                  "answer's NLL), as TRL computes them; on prompt records (prompt, and the fields "
                  "the rewards read): grpo, the policy gradient over completions the run samples "
                  "and --reward scores, or distill, on-policy distillation: the same sampling, "
                  "each sampled token scored by --teacher (the per-token reverse KL)"),
      default_noted(float_option("beta", "preference.beta", &C::beta, at_least_0,
                                 "dpo, ipo, simpo: the scale of the log-probability ratios (TRL's "
                                 "beta, above 0); grpo: the weight of the k3 KL to the reference"),
                    "0.1; grpo: 0, as TRL"),
      float_option("label_smoothing", "preference.label_smoothing", &C::label_smoothing,
                   Range::interval(0, true, 0.5, false),
                   "dpo, simpo: the assumed share of pairs whose labels are flipped (cDPO)"),
      float_option("simpo_gamma", "preference.simpo_gamma", &C::simpo_gamma, at_least_0,
                   "simpo: the target reward margin"),
      float_option("orpo_lambda", "preference.orpo_lambda", &C::orpo_lambda, positive,
                   "orpo: the weight of the odds-ratio term beside the chosen answer's NLL (TRL's "
                   "beta)"),
      float_option("rpo_alpha", "preference.rpo_alpha", &C::rpo_alpha, at_least_0,
                   "dpo, ipo: the weight of the chosen answer's NLL per token added to the loss "
                   "(RPO; TRL's loss_type [sigmoid, sft] with loss_weights [1, alpha]); 0 = off"),
      bool_option("precompute_ref_logps", "preference.precompute_ref_logps",
                  &C::precompute_ref_logps,
                  "dpo, ipo: the reference model's log-probabilities of every pair in one pass "
                  "before training, none of its forwards while training"),
      integer_option("num_generations", "grpo.num_generations", &C::num_generations, at_least_1,
                     "grpo, distill: completions sampled per prompt (a group); batch_size x "
                     "grad_accum_steps completions a step"),
      integer_option("max_completion_length", "grpo.max_completion_length",
                     &C::max_completion_length, at_least_1,
                     "grpo, distill: tokens a completion may have; one that reaches it without a "
                     "stop token is truncated"),
      float_option("temperature", "grpo.temperature", &C::temperature, positive,
                   "grpo, distill: the sampler's softmax temperature (the log-probabilities are "
                   "of logits / temperature, as TRL's; distill's teacher scores at 1)"),
      integer_option("top_k", "grpo.top_k", &C::top_k, at_least_0,
                     "grpo, distill: sample among the K most likely tokens; 0: all"),
      float_option("top_p", "grpo.top_p", &C::top_p, Range::interval(0, false, 1, true),
                   "grpo, distill: then among the fewest whose probabilities add up to P; 1: all"),
      enum_option("loss_type", "grpo.loss_type", &C::loss_type,
                  "grpo: how the token losses are normalised, as TRL's loss_type: grpo (each "
                  "completion's mean), dr_grpo (sum / (completions x max_completion_length)), "
                  "dapo (the mean over the step's completion tokens), bnpo (each micro-batch's "
                  "token mean)"),
      float_option("epsilon", "grpo.epsilon", &C::epsilon, positive,
                   "grpo: the importance ratio is clipped to [1 - epsilon, 1 + epsilon_high]"),
      default_noted(float_option("epsilon_high", "grpo.epsilon_high", &C::epsilon_high, at_least_0,
                                 "grpo: the clip's upper side (DAPO's clip-higher)"),
                    "epsilon"),
      enum_option("scale_rewards", "grpo.scale_rewards", &C::scale_rewards,
                  "grpo: advantages are rewards less their group's mean, divided by the group's "
                  "std, the whole batch's, or none (Dr. GRPO)"),
      bool_option("mask_truncated_completions", "grpo.mask_truncated_completions",
                  &C::mask_truncated_completions,
                  "grpo, distill: a completion cut at max_completion_length takes no part in "
                  "the loss"),
      integer_option("num_iterations", "grpo.num_iterations", &C::num_iterations, at_least_1,
                     "grpo: optimizer steps on each batch of completions (TRL's mu), the later "
                     "ones against the first's log-probabilities"),
      enum_option("importance_sampling_level", "grpo.importance_sampling_level",
                  &C::importance_sampling_level,
                  "grpo: one importance ratio per token, or per completion (GSPO)"),
      enum_option("sampler", "grpo.sampler", &C::sampler,
                  "grpo, distill: exact (batch-invariant kernels: the sampler's log-probabilities "
                  "are the training forward's bit for bit; CPU only so far) or fast (the usual "
                  "kernels, their mismatch corrected by importance weights)"),
      enum_option("importance_sampling_mode", "grpo.importance_sampling_mode",
                  &C::importance_sampling_mode,
                  "grpo, --sampler fast: the trainer-to-sampler probability ratio per token or per "
                  "completion, clamped to the cap (truncate) or 0 above it (mask), as TRL's "
                  "vllm_importance_sampling_mode"),
      float_option("importance_sampling_cap", "grpo.importance_sampling_cap", &C::importance_sampling_cap,
                   positive, "grpo, --sampler fast: the largest importance weight kept (TRL's "
                   "vllm_importance_sampling_clip_max)"),
      string_option("reward", "grpo.reward", &C::reward, false, "NAME[:WEIGHT],...",
                    "grpo: the rewards summed, each with its weight: math (the number the "
                    "completion gives against the record's answer), exact, format "
                    "(--reward_format), overlong (DAPO's, --overlong_buffer), program "
                    "(--reward_command)"),
      string_option("reward_command", "grpo.reward_command", &C::reward_command, false, "CMD",
                    "grpo: a reward program, run once by /bin/sh -c: a JSON line per group on "
                    "its stdin, {\"rewards\": [...]} back on its stdout"),
      float_option("reward_timeout", "grpo.reward_timeout", &C::reward_timeout, positive,
                   "grpo: seconds the reward program may take for an answer"),
      string_option("reward_answer_field", "grpo.reward_answer_field", &C::reward_answer_field,
                    true, "FIELD", "grpo: the prompt record's field the math and exact rewards "
                    "compare with"),
      string_option("reward_format", "grpo.reward_format", &C::reward_format, true, "REGEX",
                    "grpo: the regular expression (ECMAScript) the format reward's whole "
                    "completion must match"),
      integer_option("overlong_buffer", "grpo.overlong_buffer", &C::overlong_buffer, at_least_0,
                     "grpo: the overlong reward's last tokens before max_completion_length, "
                     "over which it falls from 0 to -1 (DAPO's soft overlong punishment)"),
      string_option("teacher", "distill.teacher", &C::teacher, false, "DIR|NAME",
                    "distill: the teacher, a Hugging Face model directory (or a name in the hub "
                    "cache) with the student's vocabulary and tokenizer, frozen; it scores every "
                    "token the student samples"),
      enum_option("teacher_dtype", "distill.teacher_dtype", &C::teacher_dtype,
                  "distill: how the teacher's block Linear weights are held: auto = as "
                  "--base_dtype holds a LoRA run's base where that is set, else the dtype the run "
                  "computes in; nf4, int8, fp8, bf16, fp16 as --base_dtype stores them"),

      // model
      catalog_option("model", "model.name", &C::model, &Catalog::models, "MODEL",
                     "Model architecture; the gpt*, llama*, qwen*, mistral* and mixtral* presets "
                     "fix the dimensions below (llama, qwen2, qwen3, mistral, qwen3-moe and "
                     "mixtral alone: tiny ones)"),
      integer_option("mlp_hidden", "model.mlp_hidden", &C::mlp_hidden, at_least_1,
                     "Width of each hidden layer of the MLP"),
      integer_option("mlp_layers", "model.mlp_layers", &C::mlp_layers, at_least_1,
                     "Number of linear layers in the MLP"),
      integer_option("cnn_channels", "model.cnn_channels", &C::cnn_channels, at_least_1,
                     "CNN base width: channels of the stem and first stage, doubled per stage"),
      integer_option("cnn_blocks", "model.cnn_blocks", &C::cnn_blocks, at_least_1,
                     "CNN residual blocks per stage (3 stages)"),
      string_option("init_from", "model.init_from", &C::init_from, false, "PATH|NAME",
                    "Start from a Hugging Face model (GPT-2, Llama, Qwen2/3, Mistral, Qwen3-MoE, Mixtral) "
                    "or a peft adapter: its directory, or a name (gpt2, Qwen/Qwen3-0.6B, ...) in "
                    "the local Hugging Face cache; BASE,ADAPTER names both. The architecture comes "
                    "from its config.json, --model may be left out"),
      integer_option("n_layer", "model.n_layer", &C::n_layer, at_least_0,
                     "Transformer blocks (GPT and Llama families); 0 takes the preset's (gpt: gpt-tiny's)"),
      integer_option("n_embd", "model.n_embd", &C::n_embd, at_least_0,
                     "Embedding width (GPT and Llama families), a multiple of n_head; 0 takes the preset's"),
      integer_option("n_head", "model.n_head", &C::n_head, at_least_0,
                     "Attention heads (GPT and Llama families); 0 takes the preset's"),
      integer_option("block_size", "model.block_size", &C::block_size, at_least_0,
                     "Context length in tokens (GPT and Llama families); 0 takes the preset's"),
      integer_option("vocab_size", "model.vocab_size", &C::vocab_size, at_least_0,
                     "Vocabulary size, the embedding's rows (GPT and Llama families); 0 takes the preset's"),
      float_option("dropout", "model.dropout", &C::dropout, unit_half_open,
                   "GPT dropout on embeddings, attention and residual branches"),
      integer_option("sliding_window", "model.sliding_window", &C::sliding_window, at_least_0,
                     "Llama-family presets but llama's (mistral, qwen2, qwen3, ...): each layer's "
                     "queries attend to themselves and the N - 1 positions before, as Mistral's "
                     "sliding window; 0 = full causal attention. With init_from the model's "
                     "config.json decides"),
      float_option("router_aux_loss_coef", "model.router_aux_loss_coef", &C::router_aux_loss_coef,
                   Range::at_least(-1),
                   "Mixture-of-Experts models (qwen3-moe, mixtral): the weight of the router's "
                   "load-balancing loss in the training loss, >= 0; -1 takes the model's "
                   "(config.json's router_aux_loss_coef, 0.001 in the presets)"),
      float_option("router_z_loss_coef", "model.router_z_loss_coef", &C::router_z_loss_coef,
                   at_least_0,
                   "Mixture-of-Experts models: the weight of ST-MoE's router z-loss, the mean "
                   "squared logsumexp of the router's logits, in the training loss; 0 = off"),

      // lora
      integer_option("lora_rank", "lora.rank", &C::lora_rank, at_least_0,
                     "LoRA: train rank-R adapters beside the frozen base's Linear layers (0: "
                     "train every parameter)"),
      float_option("lora_alpha", "lora.alpha", &C::lora_alpha, positive,
                   "LoRA: the adapters' output is scaled by lora_alpha / lora_rank"),
      float_option("lora_dropout", "lora.dropout", &C::lora_dropout, unit_half_open,
                   "LoRA: dropout on the adapters' input"),
      list_option(string_option("lora_targets", "lora.target_modules", &C::lora_targets, false, "LIST",
                    "LoRA: the Linear layers that get adapters, comma-separated module names "
                    "matched as peft's target_modules (c_attn,c_proj or q_proj,v_proj,...); "
                    "default: the family's (gpt: c_attn; llama, qwen2, qwen3, mistral: "
                    "q_proj,v_proj); a name may end an expert group's weight too "
                    "(experts.down_proj)")),
      list_option(string_option("lora_target_parameters", "lora.target_parameters",
                                &C::lora_target_parameters, false, "LIST",
                    "LoRA: expert group weights that get one adapter each, comma-separated, "
                    "matched as peft's target_parameters (mlp.experts.gate_up_proj,"
                    "mlp.experts.down_proj); none by default")),
      enum_option("base_dtype", "lora.base_dtype", &C::base_dtype,
                  "LoRA: how the frozen base's block Linear weights are stored: auto = the "
                  "dtype the run computes in; nf4 = QLoRA's 4-bit NormalFloat with double "
                  "quantization (bitsandbytes' bytes), int8 = each output row scaled by its "
                  "absmax, fp8 = e4m3 with a scale per output row, bf16 or fp16 = that half "
                  "dtype whatever the run computes in; each dequantized to the compute dtype "
                  "where its GEMM runs"),

      // data
      checked_string_option(
          "dataset", "data.dataset", &C::dataset,
          [](std::string_view text) { return parse_dataset_spec(text).has_value(); },
          "one of " + std::string(kDatasetSpecExpected), "SPEC",
          "Training data: synthetic (matched to the model), or a kind and a path"),
      integer_option("synthetic_samples", "data.synthetic_samples", &C::synthetic_samples,
                     at_least_1, "Samples in the synthetic dataset (token windows for gpt models)"),
      integer_option("synthetic_features", "data.synthetic_features", &C::synthetic_features,
                     at_least_1, "Input features per synthetic sample"),
      integer_option("synthetic_classes", "data.synthetic_classes", &C::synthetic_classes,
                     Range::at_least(2), "Number of classes in the synthetic dataset"),
      float_option("val_fraction", "data.val_fraction", &C::val_fraction,
                   Range::interval(0, true, 0.5, true),
                   "Share held out for validation when the dataset has no validation files"),
      string_option("tokenizer", "data.tokenizer", &C::tokenizer, false, "PATH",
                    "Tokenizer for text: and jsonl: data (GPT-2, Llama-3, Qwen2 or SentencePiece BPE): a "
                    "directory with tokenizer.json or vocab.json + merges.txt, such a file, or a "
                    "*.tiktoken file (default: "
                    "init_from's files; without init_from each byte is a token)"),
      string_option("text_field", "data.text_field", &C::text_field, true, "NAME",
                    "The string field of each JSON Lines record that holds its document (jsonl:)"),
      bool_option("packing", "data.packing", &C::packing,
                  "text: and jsonl: documents joined by <|endoftext|> and cut into windows, "
                  "instruction records packed whole into windows where none sees another; "
                  "false: one example per document or record, truncated to max_length, padding "
                  "not scored"),
      bool_option("document_mask", "data.document_mask", &C::document_mask,
                  "Packed text: each token attends only to earlier tokens of its own document, "
                  "positions restarting after each <|endoftext|> (needs a tokenizer and a "
                  "transformer)"),
      integer_option("max_length", "data.max_length", &C::max_length, at_least_0,
                     "Input tokens per text: or jsonl: sample, at most the model's block_size (0: "
                     "block_size)"),
      string_option("token_cache", "data.token_cache", &C::token_cache, false, "DIR",
                    "Directory keeping tokenized text: and jsonl: data for later runs (default: "
                    "output_dir/token_cache)"),
      string_option("chat_template", "data.chat_template", &C::chat_template, false, "FILE",
                    "Chat template rendering jsonl: instruction records: a .jinja file, or a JSON "
                    "file of per-role prefixes and suffixes (default: the tokenizer's own Jinja "
                    "template, else Llama-3's, ChatML or plain by its special tokens)"),
      checked_string_option("chat_template_kwargs", "data.chat_template_kwargs", &C::chat_template_kwargs,
                            is_json_object, "a JSON object such as '{\"enable_thinking\": false}'", "JSON",
                            "Variables for a Jinja chat template, as apply_chat_template's kwargs "
                            "(e.g. '{\"enable_thinking\": false}' for Qwen3)"),
      bool_option("train_on_prompt", "data.train_on_prompt", &C::train_on_prompt,
                  "Score the prompt (user and system) tokens of instruction records too; false: "
                  "only completion and assistant tokens"),
      enum_option("data_sampling", "data.sampling", &C::data_sampling,
                  "Training batch order: random (a seeded permutation per epoch) or sequential"),
      integer_option("loader_workers", "data.loader_workers", &C::loader_workers, at_least_0,
                     "Background threads that gather batches; 0 gathers on the training thread"),
      integer_option("prefetch", "data.prefetch", &C::prefetch, at_least_1,
                     "Batches the loader keeps ready ahead of the model"),

      // dist
      enum_option("dist_backend", "dist.backend", &C::dist_backend,
                  "Collective backend of a distributed run: auto = nccl on GPUs, gloo on CPUs"),
      integer_option("dist_timeout", "dist.timeout", &C::dist_timeout, at_least_1,
                     "Seconds a rank waits for the others (rendezvous, collectives) before it "
                     "stops with an error naming the missing rank"),
      enum_option("reduce_dtype", "dist.reduce_dtype", &C::reduce_dtype,
                  "Dtype gradients are reduced across ranks in (all-reduce, or ZeRO-2's "
                  "reduce-scatter): grad = the gradients' own, fp32, or bf16 (half the traffic, "
                  "rounded)"),
      integer_option("zero_stage", "dist.zero_stage", &C::zero_stage, Range::interval(0, true, 3, true),
                     "ZeRO stage of a distributed run (DeepSpeed's numbering): 0 replicates "
                     "everything, 1 shards the optimizer state (and O2's fp32 masters) across "
                     "ranks, 2 the gradients too, 3 the parameters too (FSDP's FULL_SHARD): each "
                     "block is all-gathered before its forward and backward and released after"),
      enum_option("param_dtype", "dist.param_dtype", &C::param_dtype,
                  "zero_stage 3: the dtype blocks' Linear weights are all-gathered and computed "
                  "in (FSDP's param_dtype): auto = the autocast dtype (fp32 without autocast), "
                  "or fp32, bf16, fp16; norms and embeddings keep the dtype the unsharded run "
                  "gives them"),
      integer_option("expert_parallel", "dist.expert_parallel", &C::expert_parallel, at_least_1,
                     "Expert parallelism of a sparse (MoE) model: each group of N consecutive "
                     "ranks divides every layer's experts among its members and sends each token "
                     "to its experts' rank by all_to_all; the groups replicate one another as "
                     "data parallelism does. N divides the world size and the experts; 1: every "
                     "rank holds every expert"),
  };
}

}  // namespace

const std::vector<Option>& options() {
  static const std::vector<Option> table = build_table();
  return table;
}

std::vector<FlagReference> training_references() {
  const Config defaults;
  std::vector<FlagReference> references;
  for (const Option& option : options()) references.push_back({&option, option.format(defaults)});
  return references;
}

const std::vector<std::string>& sections() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> found;
    for (const Option& option : options()) {
      if (!option.section.empty() && std::ranges::find(found, option.section) == found.end()) {
        found.push_back(option.section);
      }
    }
    return found;
  }();
  return names;
}

const Option* find_option(std::string_view name) {
  auto found = std::ranges::find(options(), name, &Option::name);
  return found == options().end() ? nullptr : &*found;
}

std::string format_value(const Config& config, std::string_view name) {
  const Option* option = find_option(name);
  if (!option) throw std::invalid_argument("no configuration option named " + std::string(name));
  return option->format(config);
}

}  // namespace ampt::config
