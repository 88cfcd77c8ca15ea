#include "ampt/data/prompt_dataset.h"

#include "ampt/core/errors.h"

#include <fmt/format.h>

#include <algorithm>

namespace ampt::data {

Batch PromptDataset::gather(const std::vector<int64_t>& indices) const {
  Batch batch;
  batch.inputs = torch::tensor(indices, torch::kInt64);
  return batch;
}

DataSplits open_prompt_dataset(const std::vector<std::string>& files, const config::Config& config,
                               const SampleRequest& request, const text::Tokenizer& tokenizer,
                               const text::ChatTemplate& chat) {
  auto prompts = text::read_prompt_records(tokenizer, chat, files);
  std::size_t shortest = SIZE_MAX, longest = 0;
  for (const auto& prompt : prompts.records) {
    for (const int32_t id : prompt.ids) {
      if (id >= request.vocab_size) {
        throw UsageError(fmt::format("{}: the prompt's token {} is outside the model's vocabulary of "
                                     "{}: train with the tokenizer the model was made for",
                                     prompt.place, id, request.vocab_size));
      }
    }
    const auto length = static_cast<int64_t>(prompt.ids.size());
    if (length + config.max_completion_length > request.block_size) {
      throw UsageError(fmt::format(
          "{}: the prompt's {} tokens and max_completion_length {} exceed the model's context of "
          "{} positions: lower --max_completion_length or shorten the prompt",
          prompt.place, length, config.max_completion_length, request.block_size));
    }
    shortest = std::min(shortest, prompt.ids.size());
    longest = std::max(longest, prompt.ids.size());
  }
  const text::PromptForm form = prompts.form;
  const auto count = static_cast<int64_t>(prompts.records.size());
  DataSplits splits;
  splits.spec = DataSpec{Task::language_model, {request.block_size}, request.vocab_size};
  splits.spec.every_target_scored = false;
  splits.train = std::make_shared<PromptDataset>(std::move(prompts));
  splits.description = fmt::format(
      "{}: {} prompt records, {}, {} to {} tokens{}; {} completions of up to {} tokens each",
      config.dataset, human_count(count), text::prompt_form_name(form), shortest, longest,
      form == text::PromptForm::conversational ? fmt::format(" ({} template)", chat.name) : "",
      config.num_generations, config.max_completion_length);
  return splits;
}

}  // namespace ampt::data
