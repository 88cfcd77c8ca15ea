#include "ampt/train/pretrained.h"

#include "ampt/checkpoint/checkpoint.h"
#include "ampt/models/model_family.h"

namespace ampt::train {

std::string load_pretrained(const config::Config& config, const NamedTensors& targets) {
  const auto weights = models::family_of(config).load_pretrained(config);
  checkpoint::copy_into(weights.tensors, targets, "pretrained model", config.init_from);
  return weights.description;
}

}  // namespace ampt::train
