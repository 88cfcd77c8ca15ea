// The one immutable, typed configuration every other part of ampt reads.
// Default values live here (the member initialisers) and nowhere else: the option table in
// options.cpp points at these members and prints their defaults from a default-built Config.
#pragma once

#include <cstdint>
#include <string>

#include "ampt/config/launch.h"

namespace ampt::config {

enum class MixedPrecision { no, fp16, bf16, auto_select, fp8 };
enum class OptLevel { O0, O1, O2 };
enum class DeviceKind { auto_select, cpu, cuda };
enum class OptimizerKind { adamw, sgd };
enum class Sampling { random, sequential };
enum class ScalerRules { torch, deepspeed };
enum class Fp8AmaxAlgo { max, most_recent };
enum class Fp8Scaling { delayed, current, rowwise };
enum class DistBackend { auto_select, nccl, gloo };
enum class ReduceDtype { grad, fp32, bf16 };
enum class ParamDtype { auto_select, fp32, bf16, fp16 };
enum class BaseDtype { auto_select, nf4, int8, fp8, bf16, fp16 };
// A feature on, off, or decided by the run on its device (auto).
enum class AutoSwitch { auto_select, on, off };
// What training minimises: token cross-entropy (pretraining, SFT), a preference loss over
// chosen/rejected pairs, GRPO's policy gradient over completions the run samples itself and
// rewards score, or on-policy distillation: the same sampling, a teacher model scoring each
// sampled token (train/objective.h, train/rollout.h).
enum class Objective { lm, dpo, ipo, simpo, orpo, grpo, distill };
// GRPO (TRL's GRPOConfig names): how the per-token losses are normalised, how rewards become
// advantages, and whether importance ratios are per token or per sequence (GSPO).
enum class GrpoLossType { grpo, dr_grpo, dapo, bnpo };
enum class ScaleRewards { group, batch, none };
enum class ImportanceSamplingLevel { token, sequence };
// grpo's sampler: batch-invariant kernels that give the trainer's log-probabilities bit for bit,
// or the training forward's usual kernels, whose mismatch an importance weight corrects.
enum class Sampler { exact, fast };
// TRL's vllm_importance_sampling_mode.
enum class ImportanceSamplingMode { token_truncate, token_mask, sequence_truncate, sequence_mask };

// Whether `objective` scores the policy against a reference model (dpo, ipo): the run makes one
// (a frozen copy, the LoRA base, or log-probabilities precomputed), the memory estimate counts
// it and recommend says which; simpo and orpo are reference-free.
constexpr bool needs_reference(Objective objective) {
  return objective == Objective::dpo || objective == Objective::ipo;
}

// Whether `objective` trains on completions the run samples of prompt records (grpo, distill):
// prompt data, the sampler's settings, a rollout per step.
constexpr bool samples_completions(Objective objective) {
  return objective == Objective::grpo || objective == Objective::distill;
}

struct Config {
  // run
  std::string config_file;  // --config: the YAML file that was read, empty when none
  std::string model = "mlp";
  std::string dataset = "synthetic";  // a spec parsed by parse_dataset_spec (dataset_spec.h)
  DeviceKind device = DeviceKind::auto_select;
  std::string output_dir = "ampt_out";
  int64_t seed = 1337;
  int64_t log_every = 100;
  int64_t eval_every = 0;    // 0: evaluate only at the end
  int64_t eval_batches = 20;  // validation batches per evaluation; 0: the whole split
  int64_t eval_batch_size = 0;  // samples per validation batch and rank; 0: batch_size
  std::string report_to = "jsonl";  // metric files: jsonl, tensorboard, csv, plot (report_to.h)
  bool debug = false;
  std::string profile;  // steps to trace, "N" or "A-B" (step_range.h); empty: none

  // checkpoint
  int64_t save_every = 0;  // 0: save only at the end and on preemption
  bool save_final = true;  // false: no checkpoint when training finishes (one on preemption still)
  int64_t keep_checkpoints = 3;
  std::string resume;      // "", "auto" or a checkpoint path
  std::string preempt_signal = "SIGUSR1";

  // amp
  MixedPrecision mixed_precision = MixedPrecision::auto_select;  // precision/choice.h decides
  OptLevel amp_opt_level = OptLevel::O1;
  bool strict_precision = false;  // refuse, rather than replace, a precision the device lacks
  // Module-name patterns (comma-separated) whose modules run and store in fp32 (precision_schedule.h).
  std::string keep_fp32_modules;
  // Stages such as "fp32:500,bf16"; empty: mixed_precision throughout (precision_schedule.h).
  std::string precision_schedule;
  // fp8 (TransformerEngine's DelayedScaling defaults): scale = 448 / amax / 2^margin
  Fp8Scaling fp8_scaling = Fp8Scaling::delayed;
  // Which Linear layers run in fp8: "auto" (measured per GEMM shape at startup), "all", or
  // comma-separated layer-name patterns (fp8_layers.h).
  std::string fp8_layers = "auto";
  int64_t fp8_amax_history_len = 1024;
  Fp8AmaxAlgo fp8_amax_compute_algo = Fp8AmaxAlgo::max;
  int64_t fp8_margin = 0;

  // perf
  bool grad_ckpt = false;      // recompute each transformer block in backward
  bool cuda_graphs = false;    // capture the training step once, replay it
  // The GPT's and Llama's fused kernels and operations (kernels/); off: plain ATen ops; auto: on,
  // except on a GPU where the run measures the plain ops faster and they fit (fused_choice.h).
  AutoSwitch fused_kernels = AutoSwitch::auto_select;
  bool gemm_epilogues = true;  // the fused MLP's bias, GELU and gradients in cuBLASLt epilogues
  bool allow_tf32 = false;     // fp32 matmuls and convolutions on TF32 tensor cores (CUDA)
  bool channels_last = true;   // the CNN in NHWC

  // scaler (torch.amp.GradScaler's defaults)
  double grad_scaler_init = 65536.0;
  double grad_scaler_growth_factor = 2.0;
  double grad_scaler_backoff = 0.5;
  int64_t grad_scaler_growth_interval = 2000;
  bool grad_scaler_enabled = true;  // false: fp16 without loss scaling (GradScaler(enabled=False))
  ScalerRules grad_scaler_rules = ScalerRules::torch;
  double loss_scale = 0.0;            // > 0: a fixed loss scale; 0: dynamic (DeepSpeed's meaning)
  int64_t hysteresis = 1;             // overflows absorbed before a backoff (deepspeed rules)
  bool consecutive_hysteresis = false;  // refill hysteresis after every clean step (deepspeed rules)
  double min_loss_scale = 0.0;        // 0: no floor
  double max_loss_scale = 0.0;        // 0: no ceiling

  // numerical stability
  int64_t max_consecutive_skips = 50;  // stop after this many skipped steps in a row; 0: never
  bool deterministic = false;
  bool autocast_cache = true;
  // O1: half copies of the weights the matmuls read, written by the optimizer step
  // (precision/half_weights.h); false: autocast casts every weight in every forward.
  bool half_weights = true;
  // With half_weights: weight gradients in fp32 straight from the GEMM; false: autocast's half
  // gradients, cast (the values of half_weights false).
  bool fp32_weight_grads = true;

  // training
  int64_t batch_size = 128;
  int64_t grad_accum_steps = 1;
  // Samples per optimizer step over all ranks (Onyx's name); resolve sets grad_accum_steps from
  // it. 0: not given.
  int64_t target_effective_batch_size = 0;
  int64_t max_steps = 0;  // 0: train for `epochs` full passes
  int64_t epochs = 3;
  OptimizerKind optimizer = OptimizerKind::adamw;
  double lr = 3e-3;
  double min_lr_ratio = 0.1;  // cosine decay ends at lr * min_lr_ratio
  double weight_decay = 0.01;
  int64_t warmup_steps = 20;
  double max_grad_norm = 1.0;  // 0 disables clipping
  double momentum = 0.9;       // SGD only
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_eps = 1e-8;
  Objective objective = Objective::lm;
  // Preference objectives (TRL's names and defaults): beta scales the log-ratios (dpo, ipo,
  // simpo); label_smoothing is cDPO's assumed share of flipped labels (dpo, simpo); simpo's target
  // margin; orpo's weight of the odds-ratio term beside the chosen answer's NLL.
  double beta = 0.1;
  double label_smoothing = 0.0;
  double simpo_gamma = 0.5;
  double orpo_lambda = 0.1;
  // dpo, ipo: the weight of the chosen answer's NLL added to the loss (RPO); 0 leaves it out.
  double rpo_alpha = 0.0;
  // dpo, ipo: the reference model's log-probabilities of every pair, computed in one pass before
  // training instead of a reference forward per step (no reference model while training).
  bool precompute_ref_logps = false;
  // grpo (TRL 1.16's GRPOConfig names and defaults): each prompt's completions sampled by the
  // run itself, scored by the rewards, their group-normalised rewards the advantages of a clipped
  // policy gradient; beta (0 here unless given) weighs the k3 KL to the reference.
  int64_t num_generations = 8;
  int64_t max_completion_length = 256;
  double temperature = 1.0;
  int64_t top_k = 0;   // 0: every token
  double top_p = 1.0;  // 1: every token
  GrpoLossType loss_type = GrpoLossType::dapo;
  double epsilon = 0.2;
  double epsilon_high = 0.0;  // 0: epsilon
  ScaleRewards scale_rewards = ScaleRewards::group;
  bool mask_truncated_completions = false;
  int64_t num_iterations = 1;  // optimizer steps on each batch of completions (TRL's mu)
  ImportanceSamplingLevel importance_sampling_level = ImportanceSamplingLevel::token;
  Sampler sampler = Sampler::exact;
  // --sampler fast: the trainer-to-sampler probability ratio's correction (TRL's defaults).
  ImportanceSamplingMode importance_sampling_mode = ImportanceSamplingMode::sequence_mask;
  double importance_sampling_cap = 3.0;
  // The rewards: "NAME[:WEIGHT],..." of math, exact, format, overlong (reward/reward_spec.h),
  // and a reward program speaking JSON Lines (reward/reward_program.h).
  std::string reward;
  std::string reward_command;
  double reward_timeout = 60.0;         // seconds for each of the program's answers
  std::string reward_answer_field = "answer";  // the record's field math and exact compare with
  std::string reward_format = R"(<think>[\s\S]*</think>[\s\S]*)";
  int64_t overlong_buffer = 0;  // DAPO's soft overlong punishment's last tokens before the max
  // distill: the teacher, a Hugging Face model directory (or a name in the hub cache) with the
  // student's vocabulary, frozen; how its block Linear weights are held (auto: base_dtype where
  // the run quantizes its base, else the compute dtype).
  std::string teacher;
  BaseDtype teacher_dtype = BaseDtype::auto_select;

  // model
  int64_t mlp_hidden = 256;
  int64_t mlp_layers = 3;
  int64_t cnn_channels = 32;  // width of the first stage; each later stage doubles it
  int64_t cnn_blocks = 1;     // residual blocks per stage
  // GPT dimensions: 0 takes the value of the preset named by `model` (gpt-tiny's for plain
  // `gpt`), anything else overrides it; models::resolve_gpt_dims applies this rule.
  int64_t n_layer = 0;
  int64_t n_embd = 0;
  int64_t n_head = 0;
  int64_t block_size = 0;  // context length: the longest token block the model accepts
  int64_t vocab_size = 0;
  double dropout = 0.0;  // on embeddings, attention weights and residual branches
  // A Llama-family preset's sliding-window attention over this many positions in every layer
  // (Mistral's); 0: full causal attention. A pretrained model's window is its config.json's.
  int64_t sliding_window = 0;
  // Mixture-of-Experts: the load-balancing loss's weight; -1: the model's own.
  double router_aux_loss_coef = -1.0;
  double router_z_loss_coef = 0.0;  // ST-MoE's router z-loss weight; 0: off
  // A Hugging Face GPT-2 to start from: a directory (config.json + model.safetensors) or a name
  // looked up offline in the Hugging Face cache (hf/pretrained.h); empty: random initialisation.
  std::string init_from;
  // LoRA (models/lora.h): rank 0 trains every parameter; above 0 the base is frozen and low-rank
  // adapters of this rank train beside the Linear layers lora_targets names.
  int64_t lora_rank = 0;
  double lora_alpha = 16.0;    // the adapter's output is scaled by lora_alpha / lora_rank
  double lora_dropout = 0.0;   // on the adapter's input only
  std::string lora_targets;    // comma-separated module names; empty: the family's default
  // Comma-separated expert group weight names, as peft's target_parameters; empty: none.
  std::string lora_target_parameters;
  // How a LoRA run stores its frozen base's block Linear weights: auto in the dtype it computes
  // in; nf4 (QLoRA, bitsandbytes' format) or int8 rows, dequantized where each GEMM runs.
  BaseDtype base_dtype = BaseDtype::auto_select;
  // Not an option: the peft adapter directory init_from named (hf/peft_adapter.h reads it through the Catalog), whose
  // weights start the adapters; init_from is then its base. Empty: none.
  std::string init_adapter;

  // data
  int64_t synthetic_samples = 65536;
  int64_t synthetic_features = 32;
  int64_t synthetic_classes = 10;
  double val_fraction = 0.1;  // held out when the dataset has no validation files of its own
  // text: and jsonl: data (data/text_dataset.h). The tokenizer: a directory or file that
  // text::load_tokenizer reads; empty: init_from's directory, else bytes as tokens.
  std::string tokenizer;
  std::string text_field = "text";  // the JSON Lines field that holds a document
  bool packing = true;  // documents joined and cut into windows; false: one padded example each
  // Packed text: a token attends only within its own document (positions restart after each
  // <|endoftext|>), as Llama 3's pretraining did; instruction records always are.
  bool document_mask = false;
  int64_t max_length = 0;  // tokens per sample (inputs); 0: the model's block_size
  std::string token_cache;  // where tokenized text is kept; empty: output_dir/token_cache
  // Instruction records: a chat template file, .jinja or JSON (text/chat_template.h); empty: the
  // tokenizer's own Jinja template, else the built-in one its special tokens point to.
  std::string chat_template;
  // A JSON object of kwargs for a Jinja chat template ({"enable_thinking": false}); empty: none.
  std::string chat_template_kwargs;
  bool train_on_prompt = false;  // score prompt tokens too; false: completion/assistant only
  Sampling data_sampling = Sampling::random;
  int64_t loader_workers = 2;  // 0: batches are gathered on the training thread
  int64_t prefetch = 4;        // batches the loader may hold ready ahead of the model

  // dist
  DistBackend dist_backend = DistBackend::auto_select;  // auto: nccl on CUDA, gloo on CPU
  int64_t dist_timeout = 600;  // seconds a rank waits for the others before giving up
  ReduceDtype reduce_dtype = ReduceDtype::grad;  // the dtype gradients are reduced in
  int64_t zero_stage = 0;  // DeepSpeed's numbering: 1 shards the optimizer state, 2 the gradients,
                           // 3 the parameters too
  // ZeRO-3: the dtype a block's parameters are all-gathered in (FSDP's param_dtype); auto: the
  // dtype the unsharded run computes each one in
  ParamDtype param_dtype = ParamDtype::auto_select;
  // A sparse model's experts divided among this many consecutive ranks, tokens sent to them by
  // all_to_all; the other ranks' factor replicates them (1: every rank holds every expert)
  int64_t expert_parallel = 1;
  // Not an option: where this process sits in the job, from the launcher's environment.
  Launch launch;
  // Not an option: the Hugging Face hub cache that init_from names are looked up in, from
  // HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub (HOME); empty when none is set.
  std::string hf_hub_cache;
};

}  // namespace ampt::config
