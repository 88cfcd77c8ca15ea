// The fused paths' self-checks themselves (kernels/self_check.cpp), run as kernel_support runs
// them on a GPU, over the CPU emulation of ampt's kernels (a KernelBackend of the emulated entry
// points, faked compute capabilities): a check that cannot run (a wrongly built input, an ATen
// call a GPU refuses) fails here instead of disabling its kernel on every GPU, a broken kernel
// fails its check, and whatever goes wrong is reported in one line.
#include "ampt/kernels/add_layer_norm.h"
#include "ampt/kernels/fused_adamw.h"
#include "ampt/kernels/fused_classifier.h"
#include "ampt/kernels/kernel_support.h"

#include "cuda_emulated/launch.h"
#include "kernels/cuda/emulated_backend.h"
#include "support/cuda_emulation/emulated_device.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include <string>

using ampt::kernels::FusedPath;
using ampt::kernels::KernelBackend;
using ampt::kernels::KernelSupport;
using ampt::kernels::KernelSupportOverride;
namespace emulated = ampt::kernels::cuda_emulated;
namespace abi = ampt::kernels::abi;

namespace {

using ampt::test::emulated_backend;

const c10::Device kCpu(c10::kCPU);

bool needs_fp8(FusedPath path) { return path == FusedPath::fp8_casts; }

}  // namespace

TEST_CASE("self-checks under the emulation: every own kernel runs and passes its check on each "
          "GPU generation",
          "[kernels][emulated][self_check]") {
  const auto backend = emulated_backend();
  // Turing (fp16 checks), Ampere, Ada (fp8 from here), Hopper, Blackwell.
  for (const int capability : {75, 86, 89, 90, 120}) {
    INFO("compute capability " << capability);
    const emu::FakedCapability faked(capability);
    KernelSupport support(ampt::kernels::own_kernel_probes(backend), backend);
    const KernelSupportOverride installed(support);
    for (const auto path : {FusedPath::softmax_cross_entropy, FusedPath::add_layer_norm,
                            FusedPath::fp8_casts, FusedPath::adamw, FusedPath::dequantize}) {
      const auto status = support.status(path, kCpu);
      INFO(ampt::kernels::path_name(path) << ": " << status.image << status.reason << "; "
                                          << status.check);
      CHECK(status.runs == (!needs_fp8(path) || capability >= 89));
      if (status.runs) CHECK_THAT(status.check, Catch::StartsWith("max relative error"));
    }
    CHECK(support.take_warnings().empty());
  }
}

TEST_CASE("self-checks under the emulation: the fused paths take the emulated kernels once they "
          "pass",
          "[kernels][emulated][self_check]") {
  const auto backend = emulated_backend();
  KernelSupport support(ampt::kernels::own_kernel_probes(backend), backend);
  const KernelSupportOverride installed(support);
  torch::manual_seed(3);
  const auto residual = torch::randn({8, 32}).requires_grad_();
  const auto branch = torch::randn({8, 32}).requires_grad_();
  const auto weight = torch::ones({32}).requires_grad_();
  const auto bias = torch::zeros({32}).requires_grad_();
  const auto out = ampt::kernels::add_layer_norm(residual, branch, weight, bias, 1e-5);
  REQUIRE(out.normed.grad_fn() != nullptr);
  CHECK(out.normed.grad_fn()->name().find("AddLayerNorm") != std::string::npos);
}

TEST_CASE("self-checks under the emulation: a kernel that computes wrongly fails its check and "
          "runs as ATen, with one warning",
          "[kernels][emulated][self_check]") {
  auto backend = emulated_backend();
  // Every row's loss written as 0: the loss and both gradients disagree with ATen.
  backend.softmax_cross_entropy = [](void* logits, abi::Dtype dtype, int64_t rows, int64_t cols,
                                     int64_t valid, const int64_t* targets, int64_t ignore,
                                     float* row_loss, bool write_grad, void* stream) {
    emulated::softmax_cross_entropy(logits, dtype, rows, cols, valid, targets, ignore, row_loss,
                                    write_grad, stream);
    for (int64_t r = 0; r < rows; ++r) row_loss[r] = 0.0f;
  };
  KernelSupport support(ampt::kernels::own_kernel_probes(backend), backend);
  const KernelSupportOverride installed(support);
  const auto status = support.status(FusedPath::softmax_cross_entropy, kCpu);
  CHECK_FALSE(status.runs);
  CHECK_THAT(status.reason, Catch::StartsWith("its self-check failed: softmax+loss kernel in "
                                              "Float: loss: relative error 1 against ATen"));
  const auto warnings = support.take_warnings();
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find('\n') == std::string::npos);
}

TEST_CASE("self-checks under the emulation: a c10 error inside a check is reported in one line, "
          "without its backtrace",
          "[kernels][emulated][self_check]") {
  auto backend = emulated_backend();
  backend.add_layer_norm_forward = [](abi::AddLayerNormLayout, const void*, const void*,
                                      const float*, const float*, int64_t, int64_t, float, void*,
                                      void*, float*, float*, void*) {
    TORCH_CHECK(false, "the kernel refused its arguments");
  };
  KernelSupport support(ampt::kernels::own_kernel_probes(backend), backend);
  const KernelSupportOverride installed(support);
  const auto status = support.status(FusedPath::add_layer_norm, kCpu);
  CHECK_FALSE(status.runs);
  CHECK(status.reason == "its self-check failed: the kernel refused its arguments");
  const auto warnings = support.take_warnings();
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] == "add+LayerNorm kernel on cpu (emulated GPU, compute capability 9.0) failed "
                       "its self-check against ATen, so ATen runs instead: the kernel refused "
                       "its arguments");
  CHECK(warnings[0].find("frame #") == std::string::npos);
}

TEST_CASE("AdamW kernel, emulated: torch's AdamW step and the half copies, skipped on found_inf",
          "[kernels][emulated]") {
  const auto backend = emulated_backend();
  KernelSupport support(ampt::kernels::own_kernel_probes(backend), backend);
  const KernelSupportOverride installed(support);
  torch::manual_seed(11);
  // 30 tensors: two launches; sizes with a ragged end, one above the launch's block stride.
  ampt::kernels::AdamWTensorLists lists, want;
  for (int i = 0; i < 30; ++i) {
    const int64_t n = i == 0 ? 300001 : 17 * (i + 1);
    lists.params.push_back(torch::randn({n}));
    lists.grads.push_back(torch::randn({n}));
    lists.exp_avgs.push_back(torch::randn({n}) * 0.1);
    lists.exp_avg_sqs.push_back(torch::rand({n}) * 0.01);
    lists.steps.push_back(torch::full({}, static_cast<float>(i % 5 + 1)));
    lists.copies.push_back(i % 3 == 0 ? torch::Tensor() : torch::empty({n}, torch::kBFloat16));
  }
  want = lists;
  for (auto* list : {&want.params, &want.exp_avgs, &want.exp_avg_sqs}) {
    for (auto& t : *list) t = t.clone();
  }
  const auto before = torch::cat(want.params);
  const ampt::kernels::AdamWSettings settings{0.9, 0.95, 0.1, 1e-8};
  const auto no_inf = torch::zeros({});
  ampt::kernels::fused_adamw(lists, settings, 3e-3, no_inf);
  ampt::kernels::fused_adamw_reference(want, settings, 3e-3, no_inf);
  // ATen's CPU kernel groups its float64 coefficients differently from its CUDA kernel, which
  // the kernel follows: a few float32 roundings apart, on updates of about lr.
  const auto update = torch::cat(lists.params) - before;
  const auto want_update = torch::cat(want.params) - before;
  CHECK(torch::allclose(update, want_update, 1e-4, 1e-6));
  CHECK(torch::allclose(torch::cat(lists.exp_avgs), torch::cat(want.exp_avgs), 1e-6, 1e-7));
  CHECK(torch::allclose(torch::cat(lists.exp_avg_sqs), torch::cat(want.exp_avg_sqs), 1e-6, 1e-12));
  for (size_t i = 0; i < lists.copies.size(); ++i) {
    if (!lists.copies[i].defined()) continue;
    CHECK(torch::equal(lists.copies[i], lists.params[i].to(torch::kBFloat16)));
  }
  // found_inf = 1: nothing moves.
  const auto params = torch::cat(lists.params);
  const auto copy = lists.copies[1].clone();
  ampt::kernels::fused_adamw(lists, settings, 3e-3, torch::ones({}));
  CHECK(torch::equal(torch::cat(lists.params), params));
  CHECK(torch::equal(lists.copies[1], copy));
  // lr as a tensor (a CUDA graph's) steps as the number does (2^-8: the same in float32).
  auto again = lists;
  for (auto* list : {&again.params, &again.exp_avgs, &again.exp_avg_sqs, &again.copies}) {
    for (auto& t : *list) t = t.defined() ? t.clone() : t;
  }
  ampt::kernels::fused_adamw(lists, settings, 0.00390625, no_inf);
  ampt::kernels::fused_adamw(again, settings, torch::full({}, 0.00390625f), no_inf);
  CHECK(torch::equal(torch::cat(lists.params), torch::cat(again.params)));
}
