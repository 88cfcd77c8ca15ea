#include "ampt/core/errors.h"
#include "ampt/data/batch_iterator.h"
#include "ampt/data/synthetic.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

using ampt::data::BatchIterator;
using ampt::data::SyntheticClassification;

TEST_CASE("synthetic data: seeded, shaped, every class present", "[data][synthetic]") {
  const SyntheticClassification a(4096, 12, 7, 5);
  const SyntheticClassification b(4096, 12, 7, 5);
  const SyntheticClassification c(4096, 12, 7, 6);
  CHECK(a.inputs.sizes() == torch::IntArrayRef({4096, 12}));
  CHECK(a.targets.sizes() == torch::IntArrayRef({4096}));
  CHECK(torch::equal(a.inputs, b.inputs));
  CHECK(torch::equal(a.targets, b.targets));
  CHECK_FALSE(torch::equal(a.inputs, c.inputs));
  CHECK(std::get<0>(torch::_unique(a.targets)).numel() == 7);
}

TEST_CASE("batch iterator: an epoch visits every sample once, then reshuffles", "[data][loader]") {
  const auto inputs = torch::arange(10, torch::kFloat32).unsqueeze(1);
  const auto targets = torch::arange(10, torch::kInt64);
  BatchIterator batches(inputs, targets, 3, 1, torch::Device(torch::kCPU));
  CHECK(batches.batches_per_epoch() == 3);  // the 10th sample is dropped (drop_last)
  std::vector<torch::Tensor> first;
  for (int i = 0; i < 3; ++i) {
    const auto batch = batches.next();
    CHECK(torch::equal(batch.inputs.squeeze(1).to(torch::kInt64), batch.targets));
    first.push_back(batch.targets);
  }
  CHECK(batches.state().epoch == 0);
  CHECK(batches.state().position == 3);
  const auto seen = torch::cat(first);
  CHECK(std::get<0>(torch::_unique(seen)).numel() == 9);
  batches.next();
  CHECK(batches.state().epoch == 1);
  CHECK(batches.state().position == 1);
}

TEST_CASE("batch iterator: a dataset smaller than one batch is an error", "[data][loader]") {
  const auto inputs = torch::zeros({5, 2});
  const auto targets = torch::zeros({5}, torch::kInt64);
  CHECK_THROWS_WITH(BatchIterator(inputs, targets, 8, 1, torch::Device(torch::kCPU)),
                    Catch::Contains("5 samples, fewer than one batch of batch_size 8"));
}

TEST_CASE("batch iterator: resuming from a saved state continues the same sequence", "[data][loader]") {
  const auto inputs = torch::arange(20, torch::kFloat32).unsqueeze(1);
  const auto targets = torch::arange(20, torch::kInt64);
  const torch::Device cpu(torch::kCPU);
  BatchIterator straight(inputs, targets, 4, 9, cpu);
  for (int i = 0; i < 7; ++i) straight.next();
  BatchIterator resumed(inputs, targets, 4, 9, cpu, straight.state());
  for (int i = 0; i < 6; ++i) CHECK(torch::equal(straight.next().targets, resumed.next().targets));
}
