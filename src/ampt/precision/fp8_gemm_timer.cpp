#include "ampt/precision/fp8_gemm_timer.h"

#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <limits>

namespace ampt::precision {
namespace {

constexpr int kWarmup = 2;
constexpr int kRounds = 3;
constexpr int kIterations = 5;

// Milliseconds per call of `step`: the best round.
template <class Step>
double time_ms(const torch::Device& device, const Milliseconds& clock, Step step) {
  const auto sync = [&] {
    if (device.is_cuda()) torch::cuda::synchronize(device.index());
  };
  for (int i = 0; i < kWarmup; ++i) step();
  double best = std::numeric_limits<double>::infinity();
  for (int r = 0; r < kRounds; ++r) {
    sync();
    const double start = clock();
    for (int i = 0; i < kIterations; ++i) step();
    sync();
    best = std::min(best, (clock() - start) / kIterations);
  }
  return best;
}

}  // namespace

double steady_milliseconds() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

GemmTimer gemm_timer(const torch::Device& device, const Fp8Recipe& recipe, Milliseconds clock) {
  return [device, recipe, clock = std::move(clock)](const GemmShape& shape) {
    const auto bf16 = torch::dtype(torch::kBFloat16).device(device);
    const auto f32 = torch::dtype(torch::kFloat32).device(device);
    const auto x = torch::randn({shape.rows, shape.in}, bf16).requires_grad_(true);
    const auto w = (torch::randn({shape.out, shape.in}, f32) * 0.02).requires_grad_(true);
    const auto b = torch::zeros({shape.out}, f32).requires_grad_(true);
    const auto dy = torch::randn({shape.rows, shape.out}, bf16);
    const auto clear = [&] {
      for (const auto* t : {&x, &w, &b}) t->mutable_grad() = torch::Tensor();
    };
    GemmTimes times;
    times.bf16_ms = time_ms(device, clock, [&] {
      at::linear(x, w.to(torch::kBFloat16), b.to(torch::kBFloat16)).backward(dy);
      clear();
    });
    auto layer = c10::make_intrusive<Fp8Linear>(recipe);
    times.fp8_ms = time_ms(device, clock, [&] {
      layer->forward(x, w, b, /*record=*/true).backward(dy);
      clear();
    });
    return times;
  };
}

}  // namespace ampt::precision
