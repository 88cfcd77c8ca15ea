// The prompts of a GRPO run as the loader hands them out: a batch is the indices of its prompts
// (the rollout, train/rollout.h, reads their tokens and records here and samples their
// completions), so that the loader's seeded order, its sharding among ranks and a checkpoint's
// data position hold for prompts as for any other data.
#pragma once

#include "ampt/config/config.h"
#include "ampt/data/data_splits.h"
#include "ampt/data/dataset.h"
#include "ampt/data/sample_request.h"
#include "ampt/text/chat_template.h"
#include "ampt/text/prompt_records.h"
#include "ampt/text/tokenizer.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ampt::data {

class PromptDataset : public Dataset {
 public:
  explicit PromptDataset(text::PromptRecords prompts) : prompts_(std::move(prompts)) {}
  int64_t size() const override { return static_cast<int64_t>(prompts_.records.size()); }
  // inputs [n] int64: the prompts' indices (record()); nothing else.
  Batch gather(const std::vector<int64_t>& indices) const override;
  const text::PromptRecord& record(int64_t index) const { return prompts_.records.at(index); }
  text::PromptForm form() const { return prompts_.form; }
  std::optional<int32_t> end_of_turn() const { return prompts_.end_of_turn; }

 private:
  text::PromptRecords prompts_;
};

// --objective grpo and distill's data: the prompt records of `files` (text/prompt_records.h)
// rendered by `chat`, every one of them training's (none held out: the figures are those of what
// the run samples). Throws UsageError for a token id at or above the vocabulary, and for a prompt
// that leaves no room for max_completion_length tokens in the model's context, naming the record.
DataSplits open_prompt_dataset(const std::vector<std::string>& files, const config::Config& config,
                               const SampleRequest& request, const text::Tokenizer& tokenizer,
                               const text::ChatTemplate& chat);

}  // namespace ampt::data
