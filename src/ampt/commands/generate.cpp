#include "ampt/commands/generate.h"

#include "ampt/checkpoint/checkpoint.h"
#include "ampt/commands/run_model.h"
#include "ampt/config/command_flags.h"
#include "ampt/core/errors.h"
#include "ampt/data/run_tokenizer.h"
#include "ampt/device/device.h"
#include "ampt/models/catalog.h"
#include "ampt/models/generation.h"
#include "ampt/models/model_family.h"

#include <fmt/format.h>

#include <cstdio>

namespace ampt::commands {
namespace {

// What generate takes besides the training options (which rebuild the model).
struct GenerateSettings {
  std::string prompt;
  std::string checkpoint;
  int64_t max_new_tokens = 100;
  double temperature = 1.0;
  int64_t top_k = 50;
  double top_p = 1.0;
};

const config::FlagTable<GenerateSettings>& generate_flags() {
  using config::Range;
  using S = GenerateSettings;
  static const config::FlagTable<S> table = {
      config::required(config::flag_only(config::string_option(
          "prompt", "", &S::prompt, true, "TEXT", "The text to continue"))),
      config::flag_only(config::string_option(
          "checkpoint", "", &S::checkpoint, false, "PATH",
          "An ampt checkpoint to generate with (its run's model settings are used); else "
          "--init_from's pretrained model")),
      config::flag_only(config::integer_option(
          "max_new_tokens", "", &S::max_new_tokens, Range::at_least(1),
          "Tokens to generate at most (fewer when the tokenizer's end of text comes)")),
      config::flag_only(config::float_option(
          "temperature", "", &S::temperature, Range::at_least(0),
          "Softmax temperature; 0 picks the most likely token (greedy)")),
      config::flag_only(config::integer_option("top_k", "", &S::top_k, Range::at_least(0),
                                               "Sample among the K most likely tokens; 0: all")),
      config::flag_only(config::float_option(
          "top_p", "", &S::top_p, Range::interval(0, false, 1, true),
          "Then among the fewest whose probabilities add up to P; 1: all")),
  };
  return table;
}

}  // namespace

std::vector<config::FlagReference> generate_flag_references() {
  return config::flag_references(generate_flags());
}

std::string generate_help() {
  return config::command_help(
      "generate",
      "Usage: ampt generate (--checkpoint PATH | --init_from DIR|NAME) --prompt TEXT [FLAGS]\n\n"
      "Continue --prompt with a language model: an ampt checkpoint (--checkpoint) or a pretrained\n"
      "Hugging Face GPT-2, Llama or Qwen2 (--init_from DIR|NAME). Greedy with --temperature 0,\n"
      "else sampled (top-k, top-p, --seed). The prompt and its continuation go to stdout, messages to stderr.",
      generate_flag_references(), &models::catalog());
}

int run_generate(const std::vector<std::string>& args, const Environment& env) {
  std::vector<std::string> training_args;
  const auto flags = config::parse_command_flags("generate", generate_flags(), args, &training_args);
  const auto& checkpoint_path = flags.checkpoint;
  std::optional<checkpoint::Checkpoint> saved;
  if (!checkpoint_path.empty()) saved = checkpoint::load(checkpoint_path);
  const auto config = run_config(saved, training_args, env);
  if (!saved && config.init_from.empty()) {
    throw UsageError("ampt generate needs a model: --checkpoint PATH or --init_from DIR|NAME");
  }

  models::SamplingOptions sampling;
  sampling.max_new_tokens = flags.max_new_tokens;
  sampling.temperature = flags.temperature;
  sampling.top_k = flags.top_k;
  sampling.top_p = flags.top_p;
  sampling.seed = static_cast<uint64_t>(config.seed);

  const auto tokenizer = data::run_tokenizer(config);
  if (!tokenizer) {
    throw UsageError(fmt::format("the run of {} named no tokenizer and did not start from a "
                                 "pretrained GPT-2: give ampt generate the one it trained with "
                                 "(--tokenizer PATH)",
                                 checkpoint_path));
  }
  sampling.stop_tokens = {tokenizer->eot_id()};
  const auto device = device::select_device(config.device).device;
  if (!models::family_of(config).generation) {
    throw UsageError(fmt::format("ampt generate continues text with a language model, and model "
                                 "{} is not one",
                                 config.model));
  }
  // The model as its run computes with it: every token's logits are those training's forward
  // gives (--mixed_precision no over a run's settings computes in fp32).
  const auto policy = load_run_policy(config, saved, checkpoint_path, device);
  for (const auto& warning : policy->precision().warnings()) {
    fmt::print(stderr, "ampt: warning: {}\n", warning);
  }
  const models::Decoding decoding{
      [&](const torch::Tensor& tokens, models::KvCache& cache) {
        return policy->next_logits(tokens, cache);
      },
      policy->model().context, device};
  const auto prompt = tokenizer->encode(flags.prompt);
  std::fputs(flags.prompt.c_str(), stdout);
  std::fflush(stdout);
  std::vector<int32_t> continuation;
  std::size_t printed = 0;
  models::generate(decoding, std::vector<int64_t>(prompt.begin(), prompt.end()), sampling,
                   [&](int64_t token) {
                     // Decoding the whole continuation each time keeps multi-byte characters
                     // split across tokens intact; only the new bytes are written.
                     continuation.push_back(static_cast<int32_t>(token));
                     const auto bytes = tokenizer->decode(continuation);
                     std::fwrite(bytes.data() + printed, 1, bytes.size() - printed, stdout);
                     std::fflush(stdout);
                     printed = bytes.size();
                   });
  std::fputs("\n", stdout);
  return 0;
}

}  // namespace ampt::commands
