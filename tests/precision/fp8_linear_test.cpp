// fp8 Linear layers: TransformerEngine's delayed-scaling arithmetic by hand, the _scaled_mm
// GEMMs of every recipe against quantise → dequantise → fp32 matmul within the error the
// hardware's accumulation allows, a GPT's loss against bf16, and the refusals.
#include "ampt/precision/fp8_linear.h"

#include "ampt/config/enum_names.h"
#include "ampt/models/gpt.h"
#include "ampt/models/linear.h"
#include "ampt/precision/autocast_guard.h"
#include "support/fp8_reference.h"
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
using ampt::test::dequantised;

namespace {

// A tensor whose amax is `amax`.
torch::Tensor with_amax(double amax) {
  return torch::tensor({0.5 * amax, -amax, 0.25 * amax}).view({1, 3});
}

// The scale each call of a sequence of amaxes used.
std::vector<double> scales_used(const Fp8Recipe& recipe, const std::vector<double>& amaxes) {
  Fp8TensorScaling scaling(recipe, c10::kFloat8_e4m3fn);
  std::vector<double> scales;
  for (double amax : amaxes) {
    const auto cast = scaling.quantize(with_amax(amax), /*record=*/true);
    scales.push_back(1.0 / cast.inverse.item<double>());
  }
  return scales;
}


// got ≈ a · b + c (c may be undefined) for a [M, K]: each of the K terms, and the rounding of
// the sum at most twice more, off by `unit` of the magnitudes summed, (K + 2) · unit · (|a|·|b|),
// plus `rounding` of the result for an output rounded once (to bf16). A bound relative to the
// result itself would mean nothing where the terms cancel, as they do in a weight gradient's sum
// over tokens.
void check_product(const torch::Tensor& got, const torch::Tensor& a, const torch::Tensor& b,
                   const torch::Tensor& c, double unit, double rounding, const char* what) {
  auto reference = torch::matmul(a, b);
  if (c.defined()) reference = reference + c;
  const double accumulation = static_cast<double>(a.size(1) + 2) * unit;
  const auto sum_bound = torch::matmul(a.abs(), b.abs()) * accumulation;
  const auto bound = sum_bound * (1 + rounding) + reference.abs() * rounding;
  const auto error = (got.to(torch::kFloat32) - reference).abs();
  INFO(what << ": largest error " << error.max().item<double>()
            << ", largest ratio of error to bound " << (error / bound).max().item<double>());
  CHECK((error <= bound).all().item<bool>());
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
  scaling.quantize(with_amax(4), true);  // the first call: scale 448/4 from its own amax
  CHECK(scaling.scale().item<double>() == Approx(112.0));
  scaling.quantize(with_amax(0), true);  // from call 1's amax 4: 112; records 0
  CHECK(scaling.scale().item<double>() == Approx(112.0));
  scaling.quantize(with_amax(2), true);  // history {0}: unusable, the scale stays 112
  CHECK(scaling.scale().item<double>() == Approx(112.0));
  const auto history = scaling.amax_history().clone();
  CHECK(history[0].item<double>() == 2.0);
  const auto cast = scaling.quantize(with_amax(64), /*record=*/false);
  CHECK(1.0 / cast.inverse.item<double>() == Approx(112.0));  // the first pass's scale
  CHECK(torch::equal(history, scaling.amax_history()));
  // Saturation: 64 · 112 is far past 448, and clips to it instead of becoming inf or NaN.
  CHECK(cast.data.to(torch::kFloat32).abs().max().item<double>() == 448.0);
  scaling.quantize(with_amax(1), true);  // from history {2}: 224; records 1
  CHECK(scaling.scale().item<double>() == Approx(224.0));
  // From history {1}: 448; records inf.
  scaling.quantize(torch::tensor({1.0, std::numeric_limits<double>::infinity()}).view({1, 2}), true);
  CHECK(scaling.scale().item<double>() == Approx(448.0));
  scaling.quantize(with_amax(1), true);  // history {inf}: unusable, the scale stays
  CHECK(scaling.scale().item<double>() == Approx(448.0));
}

// Hopper's fp8 tensor cores align each product to the largest of its group and add it into an
// accumulator of 13 mantissa bits, truncating, until cuBLASLt promotes the partial sum to fp32
// (every few k-blocks without fast accumulation, never with it). So on a GPU a product of the
// very fp8 operands the reference uses differs from the fp32 matmul by up to 2^-13 of the
// magnitudes summed per term; on a CPU by fp32's 2^-24. A wrongly scaled, transposed or typed
// operand moves the terms by 2^-4 and more, well beyond either.
TEST_CASE("fp8 linear: forward and backward equal quantise, dequantise, fp32 matmul",
          "[precision][fp8]") {
  for (const auto& device : ampt::test::fp8_devices()) {
    for (const auto scaling : {Fp8Scaling::current, Fp8Scaling::delayed, Fp8Scaling::rowwise}) {
      INFO("device " << device.str() << ", " << ampt::config::to_string(scaling) << " scaling");
      torch::manual_seed(11);
      const auto opts = torch::TensorOptions().device(device);
      const auto x = (torch::randn({2, 16, 32}, opts) * 3).requires_grad_(true);
      const auto w = (torch::randn({48, 32}, opts) * 0.1).requires_grad_(true);
      const auto b = torch::randn({48}, opts).requires_grad_(true);
      const auto dy = torch::randn({2, 16, 48}, opts) * 1e-3;

      Fp8Recipe recipe;
      recipe.scaling = scaling;  // delayed: a first call scales from its own amax, as current
      auto layer = c10::make_intrusive<Fp8Linear>(recipe);
      const auto y = layer->forward(x, w, b, /*record=*/true);
      CHECK(y.scalar_type() == torch::kBFloat16);
      y.backward(dy.to(torch::kBFloat16));

      const bool rowwise = scaling == Fp8Scaling::rowwise;
      const auto e4m3 = c10::kFloat8_e4m3fn;
      const auto grad_dtype = rowwise ? e4m3 : c10::kFloat8_e5m2;
      const auto x2 = x.detach().reshape({-1, 32});
      const auto dy2 = dy.to(torch::kBFloat16).to(torch::kFloat32).reshape({-1, 48});
      const double unit = device.is_cuda() ? std::ldexp(1.0, -13) : std::ldexp(1.0, -24);
      // y and, row-wise, every GEMM output are rounded once to bf16 (8 significant bits).
      const double bf16 = std::ldexp(1.0, -8);
      check_product(y.reshape({-1, 48}), dequantised(x2, e4m3, rowwise, 1),
                    dequantised(w.detach(), e4m3, rowwise, 1).t(),
                    b.detach().to(torch::kBFloat16).to(torch::kFloat32), unit, bf16, "y");
      const double rounding = rowwise ? bf16 : 0.0;
      check_product(x.grad().reshape({-1, 32}), dequantised(dy2, grad_dtype, rowwise, 1),
                    dequantised(w.detach(), e4m3, rowwise, 0), {}, unit, rounding, "dx");
      check_product(w.grad(), dequantised(dy2, grad_dtype, rowwise, 0).t(),
                    dequantised(x2, e4m3, rowwise, 0), {}, unit, rounding, "dW");
      CHECK(torch::allclose(b.grad(), dy2.sum(0), 1e-5, 1e-7));
      CHECK(w.grad().scalar_type() == torch::kFloat32);
      CHECK(x.grad().scalar_type() == torch::kFloat32);
    }
  }
}

TEST_CASE("fp8 GPT: 40 steps of training, head included, stay within 5% of the bf16 loss", "[precision][fp8]") {
  ampt::models::GptDims dims;
  dims.n_layer = 2;
  dims.n_embd = 64;
  dims.n_head = 4;
  dims.block_size = 32;
  dims.vocab_size = 64;
  const auto train = [&](bool fp8) {
    torch::manual_seed(21);
    ampt::models::Gpt gpt(dims);
    if (fp8) {
      ampt::models::attach_fp8(*gpt, Fp8Recipe{}, [](const std::string&) { return true; });
      gpt->set_fp8_head(true);
    }
    torch::optim::AdamW optimizer(gpt->parameters(), torch::optim::AdamWOptions(3e-3));
    // A fixed batch of sequences that repeat a short random phrase: learnable in a few steps.
    const auto phrase = torch::randint(0, 64, {8, 8}, torch::kInt64);
    const auto tokens = phrase.repeat({1, 5}).narrow(1, 0, 33);
    std::vector<double> losses;
    for (int step = 0; step < 40; ++step) {
      torch::Tensor loss;
      {
        ampt::precision::AutocastGuard autocast(c10::kCPU, c10::kBFloat16, true);
        // The fused loss: with fp8, the head's matmuls too.
        loss = gpt->loss(tokens.narrow(1, 0, 32), tokens.narrow(1, 1, 32));
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
  CHECK_THAT(mlp.err, Catch::Contains("mixed_precision fp8 runs a transformer's Linear layers in "
                                      "fp8 and model mlp is not a transformer"));

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
