// fp8 Linear layers: TransformerEngine's delayed-scaling arithmetic by hand, the _scaled_mm
// GEMMs against quantise → dequantise → fp32 matmul, a GPT's loss against bf16, and the refusals.
#include "ampt/precision/fp8_linear.h"

#include "ampt/models/gpt.h"
#include "ampt/precision/autocast_guard.h"
#include "support/process.h"

#include <ATen/cuda/CUDAContext.h>
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <cmath>

using ampt::config::Fp8AmaxAlgo;
using ampt::config::Fp8Scaling;
using ampt::precision::Fp8Linear;
using ampt::precision::Fp8Recipe;
using ampt::precision::Fp8TensorScaling;

namespace {

// A tensor whose amax is `amax`.
torch::Tensor with_amax(double amax) { return torch::tensor({0.5 * amax, -amax, 0.25 * amax}); }

// The scale each call of a sequence of amaxes used.
std::vector<double> scales_used(const Fp8Recipe& recipe, const std::vector<double>& amaxes) {
  Fp8TensorScaling scaling(recipe, c10::kFloat8_e4m3fn);
  std::vector<double> scales;
  for (double amax : amaxes) {
    const auto [q, inv] = scaling.quantize(with_amax(amax), /*record=*/true);
    scales.push_back(1.0 / inv.item<double>());
  }
  return scales;
}

// Every device this build can run _scaled_mm on: the CPU, and a GPU of compute capability 8.9+.
std::vector<torch::Device> fp8_devices() {
  std::vector<torch::Device> devices{torch::kCPU};
  if (torch::cuda::is_available()) {
    const auto* p = at::cuda::getDeviceProperties(0);
    if (p->major * 10 + p->minor >= 89) devices.emplace_back(torch::kCUDA, 0);
  }
  return devices;
}

torch::Tensor dequantised(const torch::Tensor& t, c10::ScalarType dtype, double amax) {
  const double scale = ampt::precision::fp8_max(dtype) / amax;
  return (t.to(torch::kFloat32) * scale).clamp(-ampt::precision::fp8_max(dtype),
                                                ampt::precision::fp8_max(dtype))
             .to(dtype)
             .to(torch::kFloat32) /
         scale;
}

}  // namespace

TEST_CASE("fp8 delayed scaling: scale = 448 / max of the previous calls' amaxes / 2^margin",
          "[precision][fp8]") {
  Fp8Recipe recipe;
  recipe.amax_history_len = 3;
  recipe.margin = 1;
  // Call 1 has no history and scales from its own amax 2; call k > 1 from the max of calls
  // k-3..k-1: {2}, {2,8}, {2,8,4}, {8,4,1}, {4,1,1}.
  const auto scales = scales_used(recipe, {2, 8, 4, 1, 1, 1});
  const std::vector<double> expected{448.0 / 2 / 2, 448.0 / 2 / 2, 448.0 / 8 / 2,
                                     448.0 / 8 / 2, 448.0 / 8 / 2, 448.0 / 4 / 2};
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("call " << i + 1);
    CHECK(scales[i] == Approx(expected[i]).epsilon(1e-6));
  }
}

TEST_CASE("fp8 delayed scaling: most_recent takes the previous call's amax", "[precision][fp8]") {
  Fp8Recipe recipe;
  recipe.amax_history_len = 4;
  recipe.amax_compute_algo = Fp8AmaxAlgo::most_recent;
  const auto scales = scales_used(recipe, {2, 8, 4, 16});
  CHECK(scales[0] == Approx(448.0 / 2));
  CHECK(scales[1] == Approx(448.0 / 2));
  CHECK(scales[2] == Approx(448.0 / 8));
  CHECK(scales[3] == Approx(448.0 / 4));
}

TEST_CASE("fp8 current scaling: each call from its own amax, history kept", "[precision][fp8]") {
  Fp8Recipe recipe;
  recipe.scaling = Fp8Scaling::current;
  recipe.margin = 2;
  const auto scales = scales_used(recipe, {2, 8, 0.5});
  CHECK(scales[0] == Approx(448.0 / 2 / 4));
  CHECK(scales[1] == Approx(448.0 / 8 / 4));
  CHECK(scales[2] == Approx(448.0 / 0.5 / 4));
}

TEST_CASE("fp8 scaling: a zero or non-finite amax keeps the previous scale, recompute records "
          "nothing",
          "[precision][fp8]") {
  Fp8Recipe recipe;
  recipe.amax_history_len = 1;
  Fp8TensorScaling scaling(recipe, c10::kFloat8_e4m3fn);
  scaling.quantize(with_amax(4), true);   // scale 448/4 from its own amax
  scaling.quantize(with_amax(0), true);   // from call 1's amax 4: 112; records 0
  CHECK(scaling.scale().item<double>() == Approx(112.0));
  scaling.quantize(with_amax(2), true);   // history {0}: falls back to its own amax 2
  CHECK(scaling.scale().item<double>() == Approx(224.0));
  const auto history = scaling.amax_history().clone();
  const auto [q, inv] = scaling.quantize(with_amax(64), /*record=*/false);
  CHECK(1.0 / inv.item<double>() == Approx(224.0));  // the first pass's scale
  CHECK(torch::equal(history, scaling.amax_history()));
  // Saturation: 64 · 224 is far past 448, and clips to it instead of becoming inf or NaN.
  CHECK(q.to(torch::kFloat32).abs().max().item<double>() == 448.0);
  scaling.quantize(torch::tensor({1.0, std::numeric_limits<double>::infinity()}), true);
  scaling.quantize(with_amax(1), true);  // history {inf}: the scale stays
  CHECK(scaling.scale().item<double>() == Approx(224.0));
}

TEST_CASE("fp8 linear: forward and backward equal quantise, dequantise, fp32 matmul",
          "[precision][fp8]") {
  for (const auto& device : fp8_devices()) {
    INFO("device " << device.str());
    torch::manual_seed(11);
    const auto opts = torch::TensorOptions().device(device);
    const auto x = (torch::randn({2, 16, 32}, opts) * 3).requires_grad_(true);
    const auto w = (torch::randn({48, 32}, opts) * 0.1).requires_grad_(true);
    const auto b = torch::randn({48}, opts).requires_grad_(true);
    const auto dy = torch::randn({2, 16, 48}, opts) * 1e-3;

    Fp8Recipe recipe;
    recipe.scaling = Fp8Scaling::current;
    auto layer = c10::make_intrusive<Fp8Linear>(recipe);
    const auto y = layer->forward(x, w, b, /*record=*/true);
    CHECK(y.scalar_type() == torch::kBFloat16);
    y.backward(dy.to(torch::kBFloat16));

    const auto xd = dequantised(x.detach(), c10::kFloat8_e4m3fn, x.abs().max().item<double>());
    const auto wd = dequantised(w.detach(), c10::kFloat8_e4m3fn, w.abs().max().item<double>());
    const auto dyb = dy.to(torch::kBFloat16).to(torch::kFloat32);
    const auto gd = dequantised(dyb, c10::kFloat8_e5m2, dyb.abs().max().item<double>());
    const auto y_ref = torch::matmul(xd, wd.t()) + b.detach().to(torch::kBFloat16).to(torch::kFloat32);
    // y is rounded once to bf16 (8 significant bits): relative 2^-8.
    CHECK(torch::allclose(y.to(torch::kFloat32), y_ref, /*rtol=*/1e-2, /*atol=*/1e-2));
    const auto dx_ref = torch::matmul(gd, wd);
    const auto dw_ref = torch::matmul(gd.reshape({-1, 48}).t(), xd.reshape({-1, 32}));
    // The gradients come out in fp32 from the same fp8 operands: only summation order differs.
    CHECK(torch::allclose(x.grad(), dx_ref, 1e-4, 1e-7));
    CHECK(torch::allclose(w.grad(), dw_ref, 1e-4, 1e-7));
    CHECK(torch::allclose(b.grad(), dyb.sum(std::vector<int64_t>{0, 1}), 1e-5, 1e-7));
    CHECK(w.grad().scalar_type() == torch::kFloat32);
  }
}

TEST_CASE("fp8 GPT: 40 steps of training stay within 5% of the bf16 loss", "[precision][fp8]") {
  ampt::models::GptDims dims;
  dims.n_layer = 2;
  dims.n_embd = 64;
  dims.n_head = 4;
  dims.block_size = 32;
  dims.vocab_size = 64;
  const auto train = [&](bool fp8) {
    torch::manual_seed(21);
    ampt::models::Gpt gpt(dims);
    if (fp8) gpt->enable_fp8(Fp8Recipe{});
    torch::optim::AdamW optimizer(gpt->parameters(), torch::optim::AdamWOptions(3e-3));
    // A fixed batch of sequences that repeat a short random phrase: learnable in a few steps.
    const auto phrase = torch::randint(0, 64, {8, 8}, torch::kInt64);
    const auto tokens = phrase.repeat({1, 5}).narrow(1, 0, 33);
    std::vector<double> losses;
    for (int step = 0; step < 40; ++step) {
      torch::Tensor loss;
      {
        ampt::precision::AutocastGuard autocast(c10::kCPU, c10::kBFloat16, true);
        const auto logits = gpt->forward(tokens.narrow(1, 0, 32));
        loss = torch::nn::functional::cross_entropy(logits.flatten(0, 1),
                                                    tokens.narrow(1, 1, 32).flatten());
      }
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      losses.push_back(loss.item<double>());
    }
    return losses;
  };
  const auto bf16 = train(false);
  const auto fp8 = train(true);
  CHECK(bf16.back() < 0.5 * bf16.front());  // it learned, so agreement means something
  for (size_t i = 0; i < bf16.size(); ++i) {
    INFO("step " << i + 1 << ": bf16 " << bf16[i] << ", fp8 " << fp8[i]);
    CHECK(std::abs(fp8[i] - bf16[i]) <= 0.05 * bf16[i]);
  }
}

TEST_CASE("fp8 refusals: a CPU, a model without transformer blocks, odd dimensions",
          "[precision][fp8][cli]") {
  const auto out = ampt::test::make_temp_dir();
  const auto cpu = ampt::test::run_ampt({"train", "--model", "gpt-tiny", "--mixed_precision",
                                         "fp8", "--device", "cpu", "--output_dir", out});
  CHECK(cpu.exit_code == 1);
  CHECK(cpu.err ==
        "ampt: error: mixed_precision fp8 needs a CUDA GPU of compute capability 8.9 or newer "
        "(Ada, Hopper); this run is on cpu: use bf16 on a CPU\n");

  const auto mlp = ampt::test::run_ampt(
      {"train", "--model", "mlp", "--mixed_precision", "fp8", "--device", "cpu", "--output_dir", out});
  CHECK(mlp.exit_code == 2);
  CHECK_THAT(mlp.err, Catch::Contains("mixed_precision fp8 runs a GPT's Linear layers in fp8 and "
                                      "model mlp is not a GPT"));

  const auto odd = ampt::test::run_ampt({"train", "--model", "gpt", "--n_embd", "72", "--n_head",
                                         "4", "--mixed_precision", "fp8", "--device", "cpu",
                                         "--output_dir", out});
  CHECK(odd.exit_code == 2);
  CHECK_THAT(odd.err, Catch::Contains("n_embd 72"));

  const auto ckpt = ampt::test::run_ampt(
      {"train", "--model", "cnn", "--grad_ckpt", "--device", "cpu", "--output_dir", out});
  CHECK(ckpt.exit_code == 2);
  CHECK_THAT(ckpt.err, Catch::Contains("grad_ckpt recomputes transformer blocks and model cnn has none"));
}
