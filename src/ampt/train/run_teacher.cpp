#include "ampt/train/run.h"

#include "ampt/config/enum_names.h"
#include "ampt/core/errors.h"
#include "ampt/data/prompt_dataset.h"
#include "ampt/hf/hub_cache.h"
#include "ampt/hf/pretrained.h"
#include "ampt/models/catalog.h"
#include "ampt/models/quantizable.h"
#include "ampt/text/tokenizer_files.h"
#include "ampt/train/pretrained.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <algorithm>

namespace ampt::train {

std::shared_ptr<models::Model> Run::load_teacher(std::string& description) {
  if (config_.zero_stage == 3) {
    throw UsageError("--objective distill under zero_stage 3 would hold its teacher, a second model, whole on "
                     "every rank (ZeRO-3 shards no frozen model yet): use zero_stage 1 or 2");
  }
  const auto dir = hf::pretrained_dir(config_.teacher, config_.hf_hub_cache, "teacher");
  hf::ModelFiles files;
  try {
    files = hf::model_files(dir);
  } catch (const RuntimeError& e) {
    throw RuntimeError(fmt::format("--teacher {} is no Hugging Face model: {}", config_.teacher, e.what()));
  }
  // The teacher is config_.teacher's model as --init_from would load it, alone: no adapters, its
  // own dimensions and context, its weights dense until --teacher_dtype stores them.
  auto teacher = config_;
  teacher.init_from = dir;
  teacher.model = models::catalog().pretrained_model(dir, config_.hf_hub_cache);
  teacher.n_layer = teacher.n_embd = teacher.n_head = teacher.vocab_size = teacher.block_size = 0;
  teacher.lora_rank = 0;
  teacher.init_adapter.clear();
  teacher.base_dtype = config::BaseDtype::auto_select;
  teacher.dropout = 0.0;
  teacher.grad_ckpt = false;  // it takes no gradients
  teacher.tokenizer.clear();
  // Both models score the same token ids: the teacher's tokenizer, where it has one, must be the
  // student's, and its vocabulary the student's or, with that tokenizer, padded further
  // (Qwen2.5-7B's 152064 rows over 0.5B's 151936): the student samples no id the teacher lacks.
  const auto student_vocab = models::sample_request(config_).vocab_size;
  const auto teacher_vocab = models::sample_request(teacher).vocab_size;
  const auto student_source = config_.init_from.empty() ? fmt::format("model {}", config_.model)
                                                        : hf::pretrained_files(config_).config_json;
  const auto& tokenizer = rollout_->tokenizer;
  const bool own_tokenizer = text::holds_tokenizer(dir);
  if (own_tokenizer) {
    const auto own = text::load_tokenizer(dir);
    if (own.fingerprint() != tokenizer.fingerprint()) {
      throw UsageError(fmt::format("--teacher {}: its tokenizer ({}) is not the student's ({}): the same "
                                   "{} token ids are other tokens to the two models",
                                   config_.teacher, own.source(), tokenizer.source(), student_vocab));
    }
  }
  const bool padded = own_tokenizer && teacher_vocab > student_vocab;
  if (teacher_vocab != student_vocab && !padded) {
    throw UsageError(fmt::format(
        "--teacher {}: its vocabulary of {} tokens ({}) is not the student's {} ({}): distillation scores the "
        "same token ids by both models, which need one tokenizer{}",
        config_.teacher, teacher_vocab, files.config_json, student_vocab, student_source,
        own_tokenizer ? " and a teacher's vocabulary at least the student's"
                      : " (a teacher without tokenizer files must have the student's vocabulary size)"));
  }
  std::string checked = !own_tokenizer ? "its vocabulary the student's (it has no tokenizer files to compare)"
                        : padded       ? fmt::format("its tokenizer the student's, its vocabulary padded to {} rows "
                                                     "over the student's {}",
                                                     teacher_vocab, student_vocab)
                                       : "its vocabulary and tokenizer the student's";
  // Every completion row, its longest prompt and max_completion_length, fits the teacher's context.
  const auto& prompts = dynamic_cast<const data::PromptDataset&>(*splits_.train);
  int64_t longest = 0;
  for (int64_t i = 0; i < prompts.size(); ++i) {
    longest = std::max(longest, static_cast<int64_t>(prompts.record(i).ids.size()));
  }
  const auto context = models::sample_request(teacher).block_size;
  if (longest + config_.max_completion_length > context) {
    throw UsageError(fmt::format("--teacher {}: its context of {} positions ({}) is shorter than the longest "
                                 "prompt's {} tokens and max_completion_length {}",
                                 config_.teacher, context, files.config_json, longest,
                                 config_.max_completion_length));
  }
  // Building the teacher draws its random init: the run's own draws must not depend on it.
  auto cpu = at::detail::getDefaultCPUGenerator();
  const auto cpu_state = cpu.get_state();
  auto model = std::make_shared<models::Model>(make_model_to_load(teacher, splits_.spec, device_.device));
  cpu.set_state(cpu_state);
  // What the student's weights load into (pretrained_targets), without masters: parameters and
  // buffers.
  NamedTensors targets;
  for (const auto& item : model->module->named_parameters()) targets.emplace_back(item.key(), item.value());
  for (const auto& item : model->module->named_buffers()) targets.emplace_back(item.key(), item.value());
  load_pretrained(teacher, targets, *model->module);
  auto held = hold_frozen(*model);
  const auto format = config_.teacher_dtype != config::BaseDtype::auto_select ? config_.teacher_dtype
                                                                               : config_.base_dtype;
  if (format != config::BaseDtype::auto_select) {
    const int64_t bytes = models::quantize_base(*model->module, format);
    held = fmt::format("{} ({:.1f} MiB)", config::to_string(format), static_cast<double>(bytes) / (1 << 20));
  }
  description = fmt::format("{} ({}), frozen, its Linear weights in {}, {}", config_.teacher, model->architecture,
                            held, checked);
  return model;
}

}  // namespace ampt::train
