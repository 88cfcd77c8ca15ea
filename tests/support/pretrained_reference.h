// Pretrained Hugging Face models that transformers makes in the tests (tests/hf/*_reference.py
// make DIR ...: random weights, save_pretrained, and reference.json with fixed tokens, their
// logits and next-token loss), loaded the way a run loads --init_from.
#pragma once

#include "ampt/models/catalog.h"
#include "ampt/models/model_family.h"
#include "ampt/models/registry.h"
#include "support/process.h"
#include "support/python_modules.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

namespace ampt::test {

inline bool have_transformers() {
  return python_has("transformers");
}

// A fresh directory from `script` make; `extra` are its flags.
inline std::string make_reference_model(const std::string& script,
                                        const std::vector<std::string>& extra = {}) {
  const auto dir = make_temp_dir();
  std::vector<std::string> argv{AMPT_PYTHON, script, "make", dir};
  argv.insert(argv.end(), extra.begin(), extra.end());
  const auto r = run_process(argv);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return dir;
}

// A run's settings for --init_from `dir` with --model left out.
inline config::Config pretrained_config(const std::string& dir) {
  config::Config config;
  config.model = models::catalog().pretrained_model(dir, "");
  config.init_from = dir;
  return config;
}

// The model built and loaded from `dir` as `ampt generate --init_from` does it, in eval mode.
inline models::Model load_reference_model(const std::string& dir) {
  const auto config = pretrained_config(dir);
  const auto request = models::sample_request(config);
  auto model = models::make_model(
      config, {data::Task::language_model, {request.block_size}, request.vocab_size});
  const auto weights = models::pretrained_weights(config);
  torch::NoGradGuard no_grad;
  auto params = model.module->named_parameters();
  REQUIRE(params.size() == weights.tensors.size());
  for (const auto& [name, tensor] : weights.tensors) params[name].copy_(tensor);
  model.module->eval();
  return model;
}

// ampt's logits (to 1e-4) and loss of reference.json's tokens are transformers'.
inline void check_against_transformers(const std::string& dir) {
  const auto reference = YAML::LoadFile(dir + "/reference.json");
  const auto tokens_list = reference["tokens"].as<std::vector<std::vector<int64_t>>>();
  std::vector<int64_t> flat;
  for (const auto& row : tokens_list) flat.insert(flat.end(), row.begin(), row.end());
  const auto tokens = torch::tensor(flat).view({static_cast<int64_t>(tokens_list.size()), -1});
  const int64_t time = tokens.size(1) - 1;
  const auto inputs = tokens.narrow(1, 0, time), targets = tokens.narrow(1, 1, time);
  auto model = load_reference_model(dir);
  torch::NoGradGuard no_grad;
  const auto logits = model.forward(inputs);
  const auto shape = reference["shape"].as<std::vector<int64_t>>();
  REQUIRE(logits.sizes().vec() == shape);  // the real vocabulary only: no padding columns
  const auto expected = torch::tensor(reference["logits"].as<std::vector<float>>()).view(shape);
  const double max_diff = (logits - expected).abs().max().item<double>();
  INFO("max |logit difference| " << max_diff);
  CHECK(max_diff <= 1e-4);
  CHECK(model.loss({inputs, targets}).item<double>() ==
        Approx(reference["next_token_loss"].as<double>()).margin(1e-4));
}

}  // namespace ampt::test
