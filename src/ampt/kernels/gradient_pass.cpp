#include "ampt/kernels/gradient_pass.h"

#include <ATen/Parallel.h>
#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_foreach_norm.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace ampt::kernels {
namespace {

// A chunk's squares make one partial sum: its size, not the thread count, fixes how the sums
// are grouped.
constexpr int64_t kChunk = int64_t{1} << 16;
// Below this many elements in all one thread does the pass: waking the others costs more.
constexpr int64_t kSerialBelow = int64_t{1} << 18;
// 8 floats, GCC's vector type: one ymm register where the build has AVX, two xmm on plain
// x86-64 (wider types split worse there). Four running sums keep additions in flight.
using Floats = float __attribute__((vector_size(32)));
constexpr int64_t kWidth = 8;

// Through memory, not by value: passing a 32-byte vector would change with the ISA.
void load(Floats& v, const float* x) { std::memcpy(&v, x, sizeof v); }

// Each function is built for AVX-512, AVX2 and plain x86-64, and the loader picks the one this
// CPU runs.
__attribute__((target_clones("avx512f", "avx2", "default"))) float sum_of_squares(const float* x,
                                                                                  int64_t n) {
  Floats a{}, b{}, c{}, d{};
  int64_t i = 0;
  for (; i + 4 * kWidth <= n; i += 4 * kWidth) {
    Floats u, v, w, z;
    load(u, x + i);
    load(v, x + i + kWidth);
    load(w, x + i + 2 * kWidth);
    load(z, x + i + 3 * kWidth);
    a += u * u;
    b += v * v;
    c += w * w;
    d += z * z;
  }
  const Floats all = (a + b) + (c + d);
  float sum = 0.0F;
  for (int64_t j = 0; j < kWidth; ++j) sum += all[j];
  for (; i < n; ++i) sum += x[i] * x[i];
  return sum;
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void scale(float* x, int64_t n,
                                                                        float c) {
  int64_t i = 0;
  for (; i + kWidth <= n; i += kWidth) {
    Floats v;
    load(v, x + i);
    v *= c;
    std::memcpy(x + i, &v, sizeof v);
  }
  for (; i < n; ++i) x[i] *= c;
}

// The gradients cut into chunks: gradient i's are first[i] to first[i + 1].
struct Chunks {
  std::vector<float*> data;
  std::vector<int64_t> sizes;
  std::vector<size_t> first;
  int64_t elements = 0;

  explicit Chunks(const std::vector<torch::Tensor>& grads) {
    for (const auto& g : grads) {
      first.push_back(data.size());
      const int64_t n = g.numel();
      auto* p = n > 0 ? g.mutable_data_ptr<float>() : nullptr;
      for (int64_t at = 0; at < n; at += kChunk) {
        data.push_back(p + at);
        sizes.push_back(std::min(kChunk, n - at));
      }
      elements += n;
    }
    first.push_back(data.size());
  }

  template <class F>
  void each(const F& f) const {
    const auto count = static_cast<int64_t>(data.size());
    if (elements < kSerialBelow) {
      for (int64_t c = 0; c < count; ++c) f(c);
      return;
    }
    at::parallel_for(0, count, 1, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) f(c);
    });
  }
};

}  // namespace

bool cpu_gradient_pass(const std::vector<torch::Tensor>& grads) {
  if (grads.empty()) return false;
  for (const auto& g : grads) {
    if (!g.is_cpu() || g.scalar_type() != torch::kFloat32 || !g.is_contiguous()) return false;
  }
  return true;
}

torch::Tensor gradient_norms(const std::vector<torch::Tensor>& grads) {
  if (!cpu_gradient_pass(grads)) return torch::stack(at::_foreach_norm(grads, 2)).to(torch::kFloat32);
  // One operation of ampt's own (the step census counts it as one, as a GPU runs it).
  RECORD_FUNCTION("ampt::gradient_norms", std::vector<c10::IValue>());
  const Chunks chunks(grads);
  std::vector<float> partial(chunks.data.size());
  chunks.each([&](int64_t c) { partial[c] = sum_of_squares(chunks.data[c], chunks.sizes[c]); });
  auto norms = torch::empty({static_cast<int64_t>(grads.size())}, torch::kFloat32);
  auto* out = norms.mutable_data_ptr<float>();
  for (size_t i = 0; i < grads.size(); ++i) {
    float sum = 0.0F;
    for (size_t c = chunks.first[i]; c < chunks.first[i + 1]; ++c) sum += partial[c];
    out[i] = std::sqrt(sum);
  }
  return norms;
}

void scale_gradients_(const std::vector<torch::Tensor>& grads, const torch::Tensor& coefficient) {
  if (!cpu_gradient_pass(grads) || !coefficient.is_cpu() ||
      coefficient.scalar_type() != torch::kFloat32 || coefficient.numel() != 1) {
    at::_foreach_mul_(grads, coefficient);
    return;
  }
  RECORD_FUNCTION("ampt::scale_gradients", std::vector<c10::IValue>());
  const float c = *coefficient.const_data_ptr<float>();
  const Chunks chunks(grads);
  chunks.each([&](int64_t i) { scale(chunks.data[i], chunks.sizes[i], c); });
}

}  // namespace ampt::kernels
