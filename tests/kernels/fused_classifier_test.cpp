// The fused head + cross-entropy against the plain logits and cross_entropy with autograd's
// backward: the same loss and gradients, padded classes out of the softmax, ignored rows out of the
// mean, whatever the chunking; on a GPU the CUDA kernel against the same reference.
#include "ampt/kernels/fused_classifier.h"

#include "ampt/precision/autocast_guard.h"
#include "support/fp8_reference.h"
#include "support/skip.h"

#include <ATen/cuda/CUDAContext.h>
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
Result run_classifier(const Case& c, Loss&& loss_fn, double grad_scale) {
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
  const auto reference = run_classifier(c, [&](auto& h, auto& w, auto& t) {
    return classifier_loss_reference(h, w, t, valid);
  }, 3.0);
  // Chunks of 1, 5 (a ragged last chunk), 23 (one chunk) and the automatic size.
  for (const int64_t chunk : {1, 5, 23, 0}) {
    INFO("chunk_rows " << chunk);
    const auto fused = run_classifier(c, [&](auto& h, auto& w, auto& t) {
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
    return run_classifier(c, [&](auto& h, auto& w, auto& t) {
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

// The fp8 head worked out chunk by chunk: operands quantised per tensor (the weight once, hidden
// and the logit gradient per chunk), logits rounded to bf16, the gradient written over them in
// bf16, float32 products of the dequantised values.
Result fp8_reference(const Case& c, int64_t valid, int64_t chunk, double grad_scale) {
  using ampt::test::dequantised;
  const auto wd = dequantised(c.weight.detach(), c10::kFloat8_e4m3fn);
  const int64_t rows = c.hidden.size(0);
  auto dh = torch::zeros_like(c.hidden), dw = torch::zeros_like(c.weight);
  auto total = torch::zeros({}, c.hidden.options());
  const auto counted = c.targets.ne(kIgnoreIndex);
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const auto hd = dequantised(c.hidden.detach().narrow(0, r0, chunk), c10::kFloat8_e4m3fn);
    const auto logits = torch::matmul(hd, wd.t()).to(torch::kBFloat16).to(torch::kFloat32);
    const auto x = logits.narrow(1, 0, valid);
    const auto targets = c.targets.narrow(0, r0, chunk);
    const auto keep = counted.narrow(0, r0, chunk).to(torch::kFloat32).unsqueeze(1);
    const auto safe = targets.clamp_min(0).unsqueeze(1);
    const auto lse = x.logsumexp(1, true);
    total += ((lse - x.gather(1, safe)) * keep).sum();
    auto g = torch::zeros_like(logits);
    g.narrow(1, 0, valid).copy_((torch::softmax(x, 1) -
                                 torch::zeros_like(x).scatter_(1, safe, 1.0)) * keep);
    const auto gd = dequantised(g.to(torch::kBFloat16), c10::kFloat8_e5m2);
    dh.narrow(0, r0, chunk).copy_(torch::matmul(gd, wd));
    dw += torch::matmul(gd.t(), hd);
  }
  const auto count = counted.sum().to(torch::kFloat32);
  return {total / count, dh * grad_scale / count, dw * grad_scale / count};
}

void compare_fp8(const torch::Device& device) {
  const int64_t classes = 48, valid = 45;
  const auto c = make_case(64, 32, classes, valid, device);
  // 32 rows a chunk; 20 rounds down to 16, whole fp8 tiles.
  for (const auto& [asked, used] : {std::pair<int64_t, int64_t>{32, 32}, {20, 16}}) {
    INFO("chunk_rows " << asked);
    const auto fused = run_classifier(c, [&](auto& h, auto& w, auto& t) {
      return classifier_loss(h, w, t, {valid, asked, /*fp8=*/true});
    }, 3.0);
    const auto reference = fp8_reference(c, valid, used, 3.0);
    CHECK(torch::allclose(fused.loss, reference.loss, 2e-3, 1e-5));
    // A bf16 logit that rounds the other way (on a GPU: the fp8 GEMM's accumulation order, __expf)
    // can move one element of the gradient by a whole e5m2 step, a quarter of it: an element-wise
    // bound fails now and then on noise alone, a bound on the error's norm does not, and a
    // mis-scaled operand still breaks it many times over.
    for (const auto& [got, want, what] : {std::tuple{fused.dhidden, reference.dhidden, "dh"},
                                          std::tuple{fused.dweight, reference.dweight, "dW"}}) {
      INFO(what << ": error norm " << (got - want).norm().item<double>() << " of norm "
                << want.norm().item<double>());
      CHECK((got - want).norm().item<double>() <= 2e-2 * want.norm().item<double>());
    }
    CHECK(fused.dweight.narrow(0, valid, classes - valid).abs().max().item<double>() == 0.0);
    CHECK(fused.dhidden[1].abs().max().item<double>() == 0.0);
  }
  // And fp8 is an approximation of the same loss: within 2% of fp32's.
  const auto fp32 = classifier_loss_reference(c.hidden, c.weight, c.targets, valid);
  const auto fp8 = classifier_loss(c.hidden, c.weight, c.targets, {valid, 32, true});
  CHECK(std::abs(fp8.item<double>() - fp32.item<double>()) <= 0.02 * fp32.item<double>());
}

}  // namespace

TEST_CASE("fused classifier fp8: e4m3 operands, e5m2 gradients, scales per chunk on the CPU",
          "[kernels][fused_classifier][fp8]") {
  compare_fp8(torch::kCPU);
}

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

TEST_CASE("fused classifier: a frozen weight (a LoRA base's head) gets no gradient, the hidden its own",
          "[kernels][fused_classifier]") {
  const auto c = make_case(9, 8, 12, 10, torch::kCPU);
  const auto weight = c.weight.detach();
  const auto h = c.hidden.detach().clone().requires_grad_(true);
  classifier_loss(h, weight, c.targets, {10, 4}).backward();
  CHECK_FALSE(weight.grad().defined());
  const auto reference = run_classifier(
      c, [](auto& hidden, auto& w, auto& targets) { return classifier_loss_reference(hidden, w, targets, 10); },
      1.0);
  CHECK(torch::allclose(h.grad(), reference.dhidden, 1e-5, 1e-6));
}

TEST_CASE("fused classifier: the CUDA kernel equals the reference on a GPU",
          "[kernels][fused_classifier][cuda]") {
  if (!torch::cuda::is_available()) {
    AMPT_SKIP(gpu, "no CUDA device: the fused classifier's CUDA kernel needs one");
  }
  const torch::Device device(torch::kCUDA, 0);
  compare_fp32(device);
  compare_autocast(device, torch::kBFloat16, 2e-2);
  compare_autocast(device, torch::kHalf, 5e-3);
  if (at::cuda::getDeviceProperties(0)->major * 10 + at::cuda::getDeviceProperties(0)->minor >= 89) {
    compare_fp8(device);
  }
}

TEST_CASE("fused classifier: a target outside the vocabulary is an error naming it, its position "
          "and the vocabulary, fused or not",
          "[kernels][fused_classifier]") {
  auto c = make_case(6, 8, 16, 12, torch::kCPU);
  const auto message = [](int64_t target, int64_t at, int64_t count) {
    return "target " + std::to_string(target) + " (position " + std::to_string(at) +
           " of 6) is outside the vocabulary of 12 classes: targets must be in [0, 12) or -100 "
           "(ignored); " + std::to_string(count) + " of them are outside";
  };
  // A padded class (12..15) is outside too: its logit is no class's.
  c.targets[3] = 13;
  CHECK_THROWS_WITH(classifier_loss(c.hidden, c.weight, c.targets, {12, 4}), message(13, 3, 1));
  c.targets[4] = -1;
  CHECK_THROWS_WITH(classifier_loss_reference(c.hidden, c.weight, c.targets, 12),
                    message(13, 3, 2));
  c.targets[3] = 0;
  CHECK_THROWS_WITH(classifier_loss(c.hidden, c.weight, c.targets, {12, 4}), message(-1, 4, 1));
  // Ignored rows are fine.
  c.targets[4] = kIgnoreIndex;
  CHECK(std::isfinite(classifier_loss(c.hidden, c.weight, c.targets, {12, 4}).item<double>()));
}
