#include "ampt/commands/generate.h"

#include "ampt/checkpoint/checkpoint.h"
#include "ampt/commands/run_model.h"
#include "ampt/config/subcommand_flags.h"
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

const std::vector<config::SubcommandFlag>& generate_flags() {
  static const std::vector<config::SubcommandFlag> flags = {
      {"prompt", "TEXT", "", "The text to continue (required)"},
      {"checkpoint", "PATH", "",
       "An ampt checkpoint to generate with (its run's model settings are used); else "
       "--init_from's pretrained model"},
      {"max_new_tokens", "N", "100", "Tokens to generate at most (fewer when <|endoftext|> comes)"},
      {"temperature", "T", "1.0", "Softmax temperature; 0 picks the most likely token (greedy)"},
      {"top_k", "K", "50", "Sample among the K most likely tokens; 0: all"},
      {"top_p", "P", "1.0", "Then among the fewest whose probabilities add up to P; 1: all"},
  };
  return flags;
}

}  // namespace

std::string generate_help() {
  return config::subcommand_help(
      "ampt generate",
      "Continue --prompt with a language model: an ampt checkpoint (--checkpoint) or a pretrained\n"
      "Hugging Face GPT-2, Llama or Qwen2 (--init_from DIR|NAME). Greedy with --temperature 0,\n"
      "else sampled (top-k, top-p, --seed). The prompt and its continuation go to stdout, messages to stderr.",
      generate_flags(), models::catalog());
}

int run_generate(const std::vector<std::string>& args, const Environment& env) {
  const auto split = config::split_subcommand_flags(args, generate_flags());
  const auto& prompt_text = split.values.at("prompt");
  if (prompt_text.empty()) throw UsageError("ampt generate needs --prompt TEXT");
  const auto& checkpoint_path = split.values.at("checkpoint");
  std::optional<checkpoint::Checkpoint> saved;
  if (!checkpoint_path.empty()) saved = checkpoint::load(checkpoint_path);
  const auto config = run_config(saved, split.rest, env);
  if (!saved && config.init_from.empty()) {
    throw UsageError("ampt generate needs a model: --checkpoint PATH or --init_from DIR|NAME");
  }

  models::SamplingOptions sampling;
  sampling.max_new_tokens = config::subcommand_integer(
      "max_new_tokens", split.values.at("max_new_tokens"), config::Range::at_least(1));
  sampling.temperature = config::subcommand_number("temperature", split.values.at("temperature"),
                                                   config::Range::at_least(0));
  sampling.top_k =
      config::subcommand_integer("top_k", split.values.at("top_k"), config::Range::at_least(0));
  sampling.top_p = config::subcommand_number("top_p", split.values.at("top_p"),
                                             config::Range::interval(0, false, 1, true));
  sampling.seed = static_cast<uint64_t>(config.seed);

  const auto tokenizer = data::run_tokenizer(config);
  if (!tokenizer) {
    throw UsageError(fmt::format("the run of {} named no tokenizer and did not start from a "
                                 "pretrained GPT-2: give ampt generate the one it trained with "
                                 "(--tokenizer PATH)",
                                 checkpoint_path));
  }
  sampling.stop_token = tokenizer->eot_id();
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
  const auto prompt = tokenizer->encode(prompt_text);
  std::fputs(prompt_text.c_str(), stdout);
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
