#include "ampt/train/pretrained.h"

#include "ampt/checkpoint/checkpoint.h"
#include "ampt/hf/gpt2_config.h"
#include "ampt/hf/gpt2_weights.h"
#include "ampt/hf/pretrained.h"
#include "ampt/models/gpt_presets.h"

#include <fmt/format.h>

namespace ampt::train {

std::string load_pretrained(const config::Config& config, const NamedTensors& targets) {
  const auto files = hf::pretrained_files(config);
  const auto hf_config = hf::read_gpt2_config(files.config_json);
  const auto padded = models::padded_vocab(hf_config.vocab_size);
  const auto weights = hf::read_gpt2_weights(files.weights, hf_config, padded);
  checkpoint::copy_into(weights, targets, "pretrained model", files.dir);
  return fmt::format("{} ({} tensors from {} file{}; vocabulary {} padded to {})", files.dir,
                     weights.size(), files.weights.size(), files.weights.size() == 1 ? "" : "s",
                     hf_config.vocab_size, padded);
}

}  // namespace ampt::train
