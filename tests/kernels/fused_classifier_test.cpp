// The fused head + cross-entropy against the plain logits and cross_entropy with autograd's
// backward: the same loss and gradients, padded classes out of the softmax, ignored rows out of the
// mean, whatever the chunking; on a GPU the CUDA kernel against the same reference.
#include "ampt/kernels/fused_classifier.h"

#include "ampt/precision/autocast_guard.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

using ampt::kernels::classifier_loss;
using ampt::kernels::classifier_loss_reference;
using ampt::kernels::kIgnoreIndex;

namespace {

struct Case {
  torch::Tensor hidden, weight, targets;
};

// `classes` weight rows of which the first `valid` are real; targets below `valid`, one ignored.
Case make_case(int64_t rows, int64_t width, int64_t classes, int64_t valid,
               const torch::Device& device) {
  torch::manual_seed(5);
  const auto f32 = torch::dtype(torch::kFloat32).device(device);
  Case c{torch::randn({rows, width}, f32), torch::randn({classes, width}, f32) * 0.5,
         torch::randint(0, valid, {rows}, torch::dtype(torch::kInt64).device(device))};
  c.targets[1] = kIgnoreIndex;
  c.hidden.requires_grad_(true);
  c.weight.requires_grad_(true);
  return c;
}

struct Result {
  torch::Tensor loss, dhidden, dweight;
};

template <class Loss>
Result run(const Case& c, Loss&& loss_fn, double grad_scale) {
  const auto h = c.hidden.detach().clone().requires_grad_(true);
  const auto w = c.weight.detach().clone().requires_grad_(true);
  const auto loss = loss_fn(h, w, c.targets);
  (loss * grad_scale).backward();
  return {loss.detach().to(torch::kFloat32), h.grad(), w.grad()};
}

void check_close(const Result& fused, const Result& reference, double rtol, double atol) {
  CHECK(fused.loss.dtype() == torch::kFloat32);
  CHECK(torch::allclose(fused.loss, reference.loss, rtol, atol));
  CHECK(fused.dhidden.dtype() == reference.dhidden.dtype());
  CHECK(fused.dweight.dtype() == reference.dweight.dtype());
  INFO("max |dh| error " << (fused.dhidden - reference.dhidden).abs().max().item<double>());
  CHECK(torch::allclose(fused.dhidden, reference.dhidden, rtol, atol));
  INFO("max |dW| error " << (fused.dweight - reference.dweight).abs().max().item<double>());
  CHECK(torch::allclose(fused.dweight, reference.dweight, rtol, atol));
}

void compare_fp32(const torch::Device& device) {
  const int64_t classes = 40, valid = 37;
  const auto c = make_case(23, 16, classes, valid, device);
  const auto reference = run(c, [&](auto& h, auto& w, auto& t) {
    return classifier_loss_reference(h, w, t, valid);
  }, 3.0);
  // Chunks of 1, 5 (a ragged last chunk), 23 (one chunk) and the automatic size.
  for (const int64_t chunk : {1, 5, 23, 0}) {
    INFO("chunk_rows " << chunk);
    const auto fused = run(c, [&](auto& h, auto& w, auto& t) {
      return classifier_loss(h, w, t, {valid, chunk});
    }, 3.0);
    check_close(fused, reference, 1e-5, 1e-6);
    // The padded rows of the weight are never in the softmax: no gradient.
    CHECK(fused.dweight.narrow(0, valid, classes - valid).abs().max().item<double>() == 0.0);
    // The ignored row gets none either.
    CHECK(fused.dhidden[1].abs().max().item<double>() == 0.0);
  }
}

void compare_autocast(const torch::Device& device, c10::ScalarType half, double tol) {
  const int64_t classes = 64, valid = 61;
  const auto c = make_case(32, 32, classes, valid, device);
  const auto under_autocast = [&](auto&& fn) {
    return run(c, [&](auto& h, auto& w, auto& t) {
      ampt::precision::AutocastGuard autocast(device.type(), half, /*enabled=*/true, true);
      return fn(h, w, t);
    }, 1.0);
  };
  const auto reference = under_autocast([&](auto& h, auto& w, auto& t) {
    return classifier_loss_reference(h, w, t, valid);
  });
  const auto fused = under_autocast([&](auto& h, auto& w, auto& t) {
    return classifier_loss(h, w, t, {valid, 7});
  });
  // The gradients are fp32 like the parameters they belong to.
  CHECK(fused.dweight.dtype() == torch::kFloat32);
  check_close(fused, reference, tol, tol);
}

}  // namespace

TEST_CASE("fused classifier: loss and gradients equal cross_entropy's in fp32 on the CPU",
          "[kernels][fused_classifier]") {
  compare_fp32(torch::kCPU);
}

TEST_CASE("fused classifier: bf16 autocast on the CPU within bf16's tolerance",
          "[kernels][fused_classifier]") {
  compare_autocast(torch::kCPU, torch::kBFloat16, 2e-2);
}

TEST_CASE("fused classifier: no gradients are kept under no_grad, and the loss is the same",
          "[kernels][fused_classifier]") {
  const auto c = make_case(9, 8, 12, 12, torch::kCPU);
  torch::NoGradGuard no_grad;
  const auto fused = classifier_loss(c.hidden, c.weight, c.targets, {0, 4});
  CHECK_FALSE(fused.requires_grad());
  CHECK(torch::allclose(fused, classifier_loss_reference(c.hidden, c.weight, c.targets, 0), 1e-5,
                        1e-6));
}

TEST_CASE("fused classifier: the CUDA kernel equals the reference on a GPU",
          "[kernels][fused_classifier][cuda]") {
  if (!torch::cuda::is_available()) {
    WARN("no CUDA device: the fused classifier's CUDA kernel needs one");
    return;
  }
  const torch::Device device(torch::kCUDA, 0);
  compare_fp32(device);
  compare_autocast(device, torch::kBFloat16, 2e-2);
  compare_autocast(device, torch::kHalf, 5e-3);
}
