#include "models/overfit.h"

#include "ampt/precision/autocast_guard.h"
#include "ampt/precision/policy.h"

#include <torch/nn/functional/loss.h>
#include <torch/optim/adamw.h>

namespace ampt_test {

LossCurve overfit(ampt::models::Model& model, const torch::Tensor& inputs,
                  const torch::Tensor& targets, ampt::config::MixedPrecision precision, int steps,
                  double lr) {
  const auto policy = ampt::precision::make_policy(precision, ampt::config::OptLevel::O1);
  torch::optim::AdamW optimizer(model.module->parameters(),
                                torch::optim::AdamWOptions(lr).weight_decay(0.0));
  model.module->train();
  LossCurve curve;
  for (int step = 0; step < steps; ++step) {
    torch::Tensor loss;
    {
      ampt::precision::AutocastGuard autocast(torch::kCPU, policy.compute_dtype, policy.autocast);
      loss = torch::nn::functional::cross_entropy(model.forward(inputs).flatten(0, -2),
                                                  targets.flatten());
    }
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
    const double value = loss.item<double>();
    if (step == 0) curve.first = value;
    curve.last = value;
  }
  return curve;
}

}  // namespace ampt_test
