#include "ampt/config/resolve.h"

#include "ampt/config/enum_names.h"
#include "ampt/config/options.h"
#include "ampt/config/precision_schedule.h"
#include "ampt/config/readers.h"
#include "ampt/config/values.h"
#include "ampt/core/errors.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <utility>
#include <stdexcept>

namespace ampt::config {

namespace {

std::size_t index_of(const Option& option) {
  return static_cast<std::size_t>(&option - options().data());
}

// The YAML file is itself a setting, so it follows the same flag-over-env precedence.
std::string config_path(const std::vector<Assignment>& flags, const std::vector<Assignment>& env) {
  for (const auto* layer : {&flags, &env}) {
    auto found = std::ranges::find(*layer, std::string_view("config"), [](const Assignment& a) {
      return std::string_view(a.option->name);
    });
    if (found != layer->end()) return found->text;
  }
  return {};
}

// huggingface_hub's own order: HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub.
std::string hf_hub_cache(const std::map<std::string, std::string>& env) {
  const auto get = [&](const char* name) {
    const auto it = env.find(name);
    return it == env.end() ? std::string() : it->second;
  };
  if (auto cache = get("HF_HUB_CACHE"); !cache.empty()) return cache;
  if (auto home = get("HF_HOME"); !home.empty()) return home + "/hub";
  if (auto home = get("HOME"); !home.empty()) return home + "/.cache/huggingface/hub";
  return "";
}

// A pretrained checkpoint makes the model the family its config.json's model_type names (the
// catalog's answer) unless --model names one; models/ refuses a model that cannot take its
// weights.
void apply_init_from(Config& config, const Source& model_source, const Catalog& catalog) {
  if (config.init_from.empty() || model_source.kind != Source::Kind::default_value) return;
  config.model = catalog.pretrained_model(config.init_from, config.hf_hub_cache);
}

// Each value the catalog's lists bound is one of them, whichever layer set it.
void check_catalog_choices(const Config& config, const std::vector<Source>& sources,
                           const Catalog& catalog) {
  for (const Option& option : options()) {
    if (option.catalog_choices == nullptr) continue;
    const auto& allowed = catalog.*option.catalog_choices;
    const auto value = option.format(config);
    if (std::ranges::find(allowed, value) != allowed.end()) continue;
    throw invalid_value(option.name, value, sources[index_of(option)],
                        fmt::format("one of {}", fmt::join(allowed, ", ")));
  }
}

// --init_from ADAPTER or BASE,ADAPTER, ADAPTER a peft LoRA directory: the base becomes init_from
// (ADAPTER alone: its adapter_config.json's base_model_name_or_path) and the adapter's settings
// the run's LoRA settings; a rank, alpha or targets set otherwise must agree with them.
void apply_adapter(Config& config, std::vector<Source>& sources, const Catalog& catalog) {
  const auto comma = config.init_from.rfind(',');
  const auto adapter = comma == std::string::npos ? config.init_from : config.init_from.substr(comma + 1);
  if (adapter.empty()) return;
  const auto settings = catalog.adapter(adapter);
  if (!settings) return;
  const auto& peft = *settings;
  const auto file = adapter + "/adapter_config.json";
  auto base = comma == std::string::npos ? peft.base_model : config.init_from.substr(0, comma);
  if (base.empty()) {
    throw UsageError(fmt::format("{} names no base_model_name_or_path: give the base as "
                                 "--init_from BASE,{}",
                                 file, adapter));
  }
  const auto source = [&](const char* name) { return sources[index_of(*find_option(name))]; };
  const auto agree = [&](const char* name, bool same, const std::string& ours, const std::string& theirs) {
    if (same || source(name).kind == Source::Kind::default_value) return;
    throw UsageError(fmt::format("{} {} ({}) differs from the adapter's {} in {}: leave it out",
                                 name, ours, describe(source(name)), theirs, file));
  };
  agree("lora_rank", config.lora_rank == peft.rank, std::to_string(config.lora_rank),
        fmt::format("r {}", peft.rank));
  agree("lora_alpha", config.lora_alpha == peft.alpha, fmt::format("{:g}", config.lora_alpha),
        fmt::format("lora_alpha {:g}", peft.alpha));
  std::string targets;
  for (const auto& t : peft.targets) targets += (targets.empty() ? "" : ",") + t;
  agree("lora_targets", config.lora_targets == targets, config.lora_targets,
        "target_modules " + targets);
  std::string parameters;
  for (const auto& p : peft.parameters) parameters += (parameters.empty() ? "" : ",") + p;
  agree("lora_target_parameters", config.lora_target_parameters == parameters,
        config.lora_target_parameters, "target_parameters " + parameters);
  // Recorded as set by the file, so that a checkpoint's settings (describe.h) carry them.
  const auto take = [&](const char* name) {
    sources[index_of(*find_option(name))] = Source{Source::Kind::file, file};
  };
  config.lora_rank = peft.rank;
  config.lora_alpha = peft.alpha;
  config.lora_targets = targets;
  config.lora_target_parameters = parameters;
  for (const char* name : {"lora_rank", "lora_alpha", "lora_targets", "lora_target_parameters"}) {
    take(name);
  }
  if (source("lora_dropout").kind == Source::Kind::default_value) {
    config.lora_dropout = peft.dropout;
    take("lora_dropout");
  }
  config.init_adapter = adapter;
  config.init_from = base;
}

// Onyx's target_effective_batch_size: the accumulation that makes it with this batch size and
// world size, recorded as set where the target was.
void apply_target_batch(Config& config, std::vector<Source>& sources) {
  if (config.target_effective_batch_size == 0) return;
  const Source& target = sources[index_of(*find_option("target_effective_batch_size"))];
  Source& accum = sources[index_of(*find_option("grad_accum_steps"))];
  if (accum.kind != Source::Kind::default_value) {
    throw UsageError(fmt::format(
        "target_effective_batch_size ({}) and grad_accum_steps ({}) both set the accumulation; "
        "give one of them",
        describe(target), describe(accum)));
  }
  const int64_t per_step = config.batch_size * config.launch.world_size;
  if (config.target_effective_batch_size % per_step != 0) {
    throw UsageError(fmt::format(
        "target_effective_batch_size {} ({}) is not a multiple of batch_size {} x {} rank{} = {}",
        config.target_effective_batch_size, describe(target), config.batch_size,
        config.launch.world_size, config.launch.world_size == 1 ? "" : "s", per_step));
  }
  config.grad_accum_steps = config.target_effective_batch_size / per_step;
  accum = target;
}

// A preference loss's option given for another objective is a mistake worth one line, not a
// setting silently unused.
void check_objective_options(const Config& config, const std::vector<Source>& sources) {
  using O = Objective;
  struct Owned {
    const char* option;
    std::vector<O> objectives;
    const char* owners;
  };
  const Owned owned[] = {{"beta", {O::dpo, O::ipo, O::simpo, O::grpo}, "dpo, ipo, simpo and grpo"},
                         {"label_smoothing", {O::dpo, O::simpo}, "dpo and simpo"},
                         {"simpo_gamma", {O::simpo}, "simpo"},
                         {"orpo_lambda", {O::orpo}, "orpo"},
                         {"rpo_alpha", {O::dpo, O::ipo}, "dpo and ipo"},
                         {"precompute_ref_logps", {O::dpo, O::ipo}, "dpo and ipo"},
                         {"num_generations", {O::grpo, O::distill}, "grpo and distill"},
                         {"max_completion_length", {O::grpo, O::distill}, "grpo and distill"},
                         {"temperature", {O::grpo, O::distill}, "grpo and distill"},
                         {"top_k", {O::grpo, O::distill}, "grpo and distill"},
                         {"top_p", {O::grpo, O::distill}, "grpo and distill"},
                         {"loss_type", {O::grpo}, "grpo"},
                         {"epsilon", {O::grpo}, "grpo"},
                         {"epsilon_high", {O::grpo}, "grpo"},
                         {"scale_rewards", {O::grpo}, "grpo"},
                         {"mask_truncated_completions", {O::grpo, O::distill}, "grpo and distill"},
                         {"num_iterations", {O::grpo}, "grpo"},
                         {"importance_sampling_level", {O::grpo}, "grpo"},
                         {"sampler", {O::grpo, O::distill}, "grpo and distill"},
                         {"importance_sampling_mode", {O::grpo}, "grpo"},
                         {"importance_sampling_cap", {O::grpo}, "grpo"},
                         {"reward", {O::grpo}, "grpo"},
                         {"reward_command", {O::grpo}, "grpo"},
                         {"reward_timeout", {O::grpo}, "grpo"},
                         {"reward_answer_field", {O::grpo}, "grpo"},
                         {"reward_format", {O::grpo}, "grpo"},
                         {"overlong_buffer", {O::grpo}, "grpo"},
                         {"teacher", {O::distill}, "distill"},
                         {"teacher_dtype", {O::distill}, "distill"}};
  for (const auto& [option, objectives, owners] : owned) {
    const Source& source = sources[index_of(*find_option(option))];
    if (source.kind == Source::Kind::default_value) continue;
    if (std::ranges::find(objectives, config.objective) != objectives.end()) continue;
    throw UsageError(fmt::format("{} ({}) is an option of the {} objective{}, and this run's "
                                 "objective is {}: drop it or set --objective",
                                 option, describe(source), owners,
                                 objectives.size() == 1 ? "" : "s",
                                 to_string(config.objective)));
  }
}

// GRPO's defaults where they differ from the preference losses' (TRL's GRPOConfig: beta 0,
// epsilon_high = epsilon), and the settings that cannot make a run of grpo or distill: one line
// each.
void apply_sampling_settings(Config& config, const std::vector<Source>& sources) {
  const Source& beta = sources[index_of(*find_option("beta"))];
  if (!samples_completions(config.objective)) {
    if (config.beta == 0 && config.objective != Objective::lm) {
      throw UsageError(fmt::format("beta 0 ({}): --objective {} divides by it or scales its "
                                   "log-ratios with it; give a value above 0",
                                   describe(beta), to_string(config.objective)));
    }
    return;
  }
  const bool grpo = config.objective == Objective::grpo;
  if (grpo && beta.kind == Source::Kind::default_value) config.beta = 0.0;
  if (grpo && config.epsilon_high == 0) config.epsilon_high = config.epsilon;
  const Source& generations = sources[index_of(*find_option("num_generations"))];
  // Distillation scores each token by the teacher, not a group's rewards: a group of one is fine.
  if (grpo && config.num_generations < 2 && config.scale_rewards != ScaleRewards::none) {
    throw UsageError(fmt::format(
        "num_generations {} ({}) leaves each prompt a group of one, whose reward std is 0: "
        "scale_rewards {} would divide by it; sample 2 or more, or set --scale_rewards none",
        config.num_generations, describe(generations), to_string(config.scale_rewards)));
  }
  const int64_t completions = config.batch_size * config.grad_accum_steps;
  if (completions % config.num_generations != 0) {
    throw UsageError(fmt::format(
        "num_generations {} ({}) does not divide the {} completions a step samples on each rank "
        "(batch_size {} x grad_accum_steps {}): each prompt's group must be whole",
        config.num_generations, describe(generations), completions, config.batch_size,
        config.grad_accum_steps));
  }
  if (grpo && config.reward.empty() && config.reward_command.empty()) {
    throw UsageError("--objective grpo needs rewards: --reward NAME[:WEIGHT],... (math, exact, "
                     "format, overlong) or --reward_command CMD");
  }
  if (!grpo && config.teacher.empty()) {
    throw UsageError("--objective distill needs a teacher: --teacher DIR, a Hugging Face model "
                     "directory (or a name in the hub cache) with the student's vocabulary");
  }
  if (config.sampler != Sampler::exact) return;
  for (const char* name : {"importance_sampling_mode", "importance_sampling_cap"}) {
    const Source& source = sources[index_of(*find_option(name))];
    if (source.kind == Source::Kind::default_value) continue;
    throw UsageError(fmt::format("{} ({}) corrects --sampler fast's mismatch, and the exact sampler "
                                 "has none: drop it or set --sampler fast",
                                 name, describe(source)));
  }
  // The training forward of exact mode must be the sampler's: no random masks in it.
  for (const auto& [name, value] : {std::pair{"dropout", config.dropout}, {"lora_dropout", config.lora_dropout}}) {
    if (value == 0.0) continue;
    throw UsageError(fmt::format("{} {} ({}) makes the training forward differ from the sampler's, "
                                 "which --sampler exact computes bit for bit: set it to 0, or use "
                                 "--sampler fast",
                                 name, value, describe(sources[index_of(*find_option(name))])));
  }
}

}  // namespace

Resolved::Resolved(Config config, std::vector<Source> sources)
    : config_(std::move(config)), sources_(std::move(sources)) {}

const Source& Resolved::source_of(std::string_view name) const {
  const Option* option = find_option(name);
  if (!option) throw std::invalid_argument("no configuration option named " + std::string(name));
  return sources_[index_of(*option)];
}

Resolved resolve(const std::vector<std::string>& args,
                 const std::map<std::string, std::string>& env, const Catalog& catalog) {
  std::vector<Assignment> flags = read_flags(args);
  std::vector<Assignment> environment = read_env(env);
  std::vector<Assignment> file;
  if (std::string path = config_path(flags, environment); !path.empty())
    file = read_yaml_file(path);

  Config config;
  std::vector<Source> sources(options().size());
  // Later layers overwrite earlier ones: this order is the precedence.
  for (const auto* layer : {&file, &environment, &flags}) {
    for (const Assignment& assignment : *layer) {
      assignment.option->set(config, assignment.text, assignment.source);
      sources[index_of(*assignment.option)] = assignment.source;
    }
  }
  config.launch = parse_launch(env);
  apply_target_batch(config, sources);
  check_objective_options(config, sources);
  apply_sampling_settings(config, sources);
  config.hf_hub_cache = hf_hub_cache(env);
  check_catalog_choices(config, sources, catalog);
  apply_adapter(config, sources, catalog);
  apply_init_from(config, sources[index_of(*find_option("model"))], catalog);
  Resolved resolved(std::move(config), std::move(sources));
  check_precision_settings(resolved);
  return resolved;
}

}  // namespace ampt::config
