// Activation checkpointing: the same gradients as the plain GPT (dropout and bf16 autocast too)
// for a fraction of the activation memory.
#include "ampt/models/gpt.h"
#include "ampt/precision/autocast_guard.h"

#include <ATen/Context.h>
#include <c10/core/CPUAllocator.h>
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <atomic>

using ampt::models::Gpt;
using ampt::models::GptDims;

namespace {

GptDims dims(double dropout) {
  GptDims d;
  d.n_layer = 4;
  d.n_embd = 64;
  d.n_head = 4;
  d.block_size = 32;
  d.vocab_size = 32;
  d.dropout = dropout;
  return d;
}

struct Pass {
  std::vector<torch::Tensor> grads;  // in named_parameters order
  torch::Tensor rng_after;           // the CPU generator's state after backward
  double loss = 0.0;
};

// One forward (under bf16 autocast when asked) and a backward outside it, as the trainer does.
Pass forward_backward(Gpt& gpt, bool grad_ckpt, bool bf16, const torch::Tensor& tokens) {
  gpt->set_grad_ckpt(grad_ckpt);
  gpt->zero_grad();
  torch::manual_seed(99);  // the same dropout masks for both passes' forwards
  torch::Tensor loss;
  {
    ampt::precision::AutocastGuard autocast(c10::kCPU, c10::kBFloat16, bf16);
    const auto logits = gpt->forward(tokens);
    loss = torch::nn::functional::cross_entropy(logits.flatten(0, 1).to(torch::kFloat32),
                                                tokens.flatten());
  }
  loss.backward();
  Pass pass;
  pass.loss = loss.item<double>();
  for (const auto& p : gpt->parameters()) pass.grads.push_back(p.grad().clone());
  pass.rng_after = at::globalContext().defaultGenerator(c10::Device(c10::kCPU)).get_state();
  return pass;
}

void check_same_gradients(double dropout, bool bf16) {
  torch::manual_seed(5);
  Gpt gpt(dims(dropout));
  gpt->train();
  const auto tokens = torch::randint(0, 32, {4, 32}, torch::kInt64);
  const auto plain = forward_backward(gpt, false, bf16, tokens);
  const auto checkpointed = forward_backward(gpt, true, bf16, tokens);
  CHECK(plain.loss == checkpointed.loss);
  REQUIRE(plain.grads.size() == checkpointed.grads.size());
  const auto names = gpt->named_parameters().keys();
  for (size_t i = 0; i < plain.grads.size(); ++i) {
    INFO("parameter " << names[i]);
    CHECK(plain.grads[i].abs().sum().item<double>() > 0.0);
    CHECK(torch::equal(plain.grads[i], checkpointed.grads[i]));
  }
  // The recomputation put the generator back where the plain backward left it.
  CHECK(torch::equal(plain.rng_after, checkpointed.rng_after));
}

// Counts the bytes of live CPU tensors, to see what a forward pass keeps for backward.
class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(size_t bytes) override {
    auto inner = base_->allocate(bytes);
    void* data = inner.get();
    const auto device = inner.device();
    live_ += static_cast<int64_t>(bytes);
    return {data, new Block{std::move(inner), bytes, this}, &release, device};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  int64_t live() const { return live_; }

 private:
  struct Block {
    c10::DataPtr inner;
    size_t bytes;
    CountingAllocator* owner;
  };
  static void release(void* context) {
    auto* block = static_cast<Block*>(context);
    block->owner->live_ -= static_cast<int64_t>(block->bytes);
    delete block;
  }

  c10::Allocator* base_;
  std::atomic<int64_t> live_{0};
};

// Bytes that stay allocated after the forward pass while its graph is alive (the saved
// activations and the loss), measured through the CPU allocator.
int64_t activation_bytes(bool grad_ckpt) {
  // Static: tensors it allocated may be freed after the test put the old allocator back.
  static CountingAllocator counter(c10::GetCPUAllocator());
  c10::Allocator* previous = c10::GetCPUAllocator();
  c10::SetCPUAllocator(&counter, /*priority=*/255);
  torch::manual_seed(5);
  Gpt gpt(dims(0.0));
  gpt->set_grad_ckpt(grad_ckpt);
  const auto tokens = torch::randint(0, 32, {8, 32}, torch::kInt64);
  const int64_t before = counter.live();
  auto loss = gpt->forward(tokens).square().mean();
  const int64_t held = counter.live() - before;
  loss.backward();
  c10::SetCPUAllocator(previous, /*priority=*/255);
  return held;
}

}  // namespace

TEST_CASE("grad_ckpt: every gradient equals the plain model's in fp32", "[models][grad_ckpt]") {
  check_same_gradients(/*dropout=*/0.0, /*bf16=*/false);
}

TEST_CASE("grad_ckpt: recomputed dropout draws the same masks", "[models][grad_ckpt]") {
  check_same_gradients(/*dropout=*/0.2, /*bf16=*/false);
}

TEST_CASE("grad_ckpt: the recomputation runs under the forward's bf16 autocast",
          "[models][grad_ckpt]") {
  check_same_gradients(/*dropout=*/0.1, /*bf16=*/true);
}

TEST_CASE("grad_ckpt: a forward keeps under a third of the activation bytes",
          "[models][grad_ckpt]") {
  const int64_t plain = activation_bytes(false);
  const int64_t checkpointed = activation_bytes(true);
  INFO("plain " << plain << " bytes, checkpointed " << checkpointed << " bytes");
  CHECK(plain > 0);
  CHECK(checkpointed * 3 < plain);
}

TEST_CASE("grad_ckpt: evaluation without grad mode runs the plain forward", "[models][grad_ckpt]") {
  torch::manual_seed(5);
  Gpt gpt(dims(0.0));
  const auto tokens = torch::randint(0, 32, {2, 32}, torch::kInt64);
  torch::NoGradGuard no_grad;
  const auto plain = gpt->forward(tokens);
  gpt->set_grad_ckpt(true);
  const auto checkpointed = gpt->forward(tokens);
  CHECK(torch::equal(plain, checkpointed));
  CHECK_FALSE(checkpointed.requires_grad());
}
