#include "ampt/data/run_tokenizer.h"

#include "ampt/core/errors.h"
#include "ampt/hf/hub_cache.h"
#include "ampt/text/tokenizer_files.h"

#include <fmt/format.h>

namespace ampt::data {

std::optional<std::string> run_tokenizer_path(const config::Config& config) {
  if (!config.tokenizer.empty()) return config.tokenizer;
  if (config.init_from.empty()) return std::nullopt;
  return hf::pretrained_dir(config.init_from, config.hf_hub_cache);
}

std::optional<text::Tokenizer> run_tokenizer(const config::Config& config) {
  if (!config.tokenizer.empty()) return text::load_tokenizer(config.tokenizer);
  const auto dir = run_tokenizer_path(config);
  if (!dir) return std::nullopt;
  try {
    return text::load_tokenizer(*dir);
  } catch (const RuntimeError& e) {
    throw RuntimeError(fmt::format("{} (init_from {}'s tokenizer; name one with --tokenizer)",
                                   e.what(), config.init_from));
  }
}

}  // namespace ampt::data
