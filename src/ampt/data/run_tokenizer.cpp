#include "ampt/data/run_tokenizer.h"

#include "ampt/core/errors.h"
#include "ampt/hf/pretrained.h"
#include "ampt/text/tokenizer_files.h"

#include <fmt/format.h>

namespace ampt::data {

std::optional<text::Vocabulary> run_vocabulary(const config::Config& config) {
  if (!config.tokenizer.empty()) return text::load_vocabulary(config.tokenizer);
  if (config.init_from.empty()) return std::nullopt;
  const auto dir = hf::pretrained_dir(config.init_from, config.hf_hub_cache);
  try {
    return text::load_vocabulary(dir);
  } catch (const RuntimeError& e) {
    throw RuntimeError(fmt::format("{} (init_from {}'s tokenizer; name one with --tokenizer)",
                                   e.what(), config.init_from));
  }
}

std::optional<text::Tokenizer> run_tokenizer(const config::Config& config) {
  auto vocabulary = run_vocabulary(config);
  if (!vocabulary) return std::nullopt;
  return text::Tokenizer(std::move(*vocabulary));
}

}  // namespace ampt::data
