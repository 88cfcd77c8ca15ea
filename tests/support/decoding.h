// What models::generate decodes with, for tests that generate with a model as it is: its own
// next_logits in eval mode, on its parameters' device, with no precision context around it (the
// fp32 of a model that computes without autocast; train::Policy gives a run's precision).
#pragma once

#include "ampt/models/generation.h"
#include "ampt/models/registry.h"

namespace ampt::test {

inline models::Decoding decoding(models::Model& model) {
  model.module->eval();
  return {model.next_logits, model.context, model.module->parameters().front().device()};
}

}  // namespace ampt::test
