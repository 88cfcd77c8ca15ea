// The residual add + LayerNorm kernels (src/ampt/kernels/cuda/add_layer_norm.cu) emulated on the
// CPU, in each layout they have, against float64 arithmetic on the same rounded inputs: the sum,
// the normalised values, each row's mean and rstd, the input gradients with and without the sum's
// own gradient, and the weight and bias gradients from the per-chunk partial sums.
#include "cuda_emulated/launch.h"
#include "kernels/cuda/kernel_checks.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <string>

using ampt::test::Guarded;
using ampt::test::check_close;
namespace emulated = ampt::kernels::cuda_emulated;
using emulated::AddLayerNormLayout;

namespace {

struct Layout {
  AddLayerNormLayout kernel;
  c10::ScalarType stream, branch, normed;
  double tolerance;  // a few units in the last place of the narrowest type
};

const std::vector<Layout>& layouts() {
  static const std::vector<Layout> all = {
      {AddLayerNormLayout::f32_f32_f32, torch::kFloat32, torch::kFloat32, torch::kFloat32, 1e-5},
      {AddLayerNormLayout::f32_bf16_bf16, torch::kFloat32, torch::kBFloat16, torch::kBFloat16, 2e-2},
      {AddLayerNormLayout::f32_f16_f16, torch::kFloat32, torch::kHalf, torch::kHalf, 2e-3},
      {AddLayerNormLayout::bf16_bf16_bf16, torch::kBFloat16, torch::kBFloat16, torch::kBFloat16, 2e-2},
      {AddLayerNormLayout::f16_f16_f16, torch::kHalf, torch::kHalf, torch::kHalf, 2e-3},
  };
  return all;
}

void check_layout(const Layout& layout, int64_t rows, int64_t cols, bool with_d_sum) {
  INFO(layout.stream << " stream, " << layout.branch << " branch, " << layout.normed
                     << " normed; " << rows << " x " << cols
                     << (with_d_sum ? ", the sum's gradient too" : ""));
  torch::manual_seed(17 + rows + cols);
  // An offset and a spread per row, so the mean and variance both matter.
  const auto residual = (torch::randn({rows, cols}) * 2 + 0.5).to(layout.stream);
  const auto branch = torch::randn({rows, cols}).to(layout.branch);
  const auto weight = 1 + 0.3 * torch::randn({cols});
  const auto bias = 0.1 * torch::randn({cols});
  const auto d_normed = torch::randn({rows, cols}).to(layout.normed);
  const auto d_sum = torch::randn({rows, cols}).to(layout.stream);

  Guarded sum({rows, cols}, layout.stream, "sum"), normed({rows, cols}, layout.normed, "normed");
  Guarded mean({rows}, torch::kFloat32, "mean"), rstd({rows}, torch::kFloat32, "rstd");
  emulated::add_layer_norm_forward(layout.kernel, residual.data_ptr(), branch.data_ptr(),
                                   weight.data_ptr<float>(), bias.data_ptr<float>(), rows, cols,
                                   1e-5f, sum.data(), normed.data(), mean.data<float>(),
                                   rstd.data<float>(), nullptr);
  // The sum is rounded to the stream's type before its statistics are taken.
  const auto want_sum = (residual.to(torch::kFloat32) + branch.to(torch::kFloat32)).to(layout.stream);
  CHECK(torch::equal(sum.get(), want_sum));
  const auto x = want_sum.to(torch::kFloat64).requires_grad_(true);
  const auto w = weight.to(torch::kFloat64).requires_grad_(true);
  const auto b = bias.to(torch::kFloat64).requires_grad_(true);
  const auto want_normed = at::layer_norm(x, {cols}, w, b, 1e-5);
  check_close(normed.get(), want_normed.detach(), layout.tolerance, "normed");
  const auto x64 = x.detach();
  check_close(mean.get(), x64.mean(1), 1e-5, "mean");
  check_close(rstd.get(), (x64.var(1, /*unbiased=*/false) + 1e-5).rsqrt(), 1e-5, "rstd");

  want_normed.backward(d_normed.to(torch::kFloat64));
  const bool own_branch_grad = layout.branch != layout.stream;
  Guarded d_residual({rows, cols}, layout.stream, "d_residual");
  Guarded d_branch({rows, cols}, layout.branch, "d_branch");
  Guarded partial({emulated::add_layer_norm_grad_chunks(rows), 2, cols}, torch::kFloat32,
                  "partial");
  emulated::add_layer_norm_backward(
      layout.kernel, sum.data(), d_normed.data_ptr(), with_d_sum ? d_sum.data_ptr() : nullptr,
      weight.data_ptr<float>(), mean.data<float>(), rstd.data<float>(), rows, cols,
      d_residual.data(), own_branch_grad ? d_branch.data() : nullptr, partial.data<float>(),
      nullptr);
  auto want_dx = x.grad();
  if (with_d_sum) want_dx = want_dx + d_sum.to(torch::kFloat64);
  check_close(d_residual.get(), want_dx, layout.tolerance, "d_residual");
  if (own_branch_grad) check_close(d_branch.get(), want_dx, layout.tolerance, "d_branch");
  // Sums over the rows of products of rounded values.
  const auto grads = partial.get().sum(0);
  check_close(grads[0], w.grad(), 4 * layout.tolerance, "d_weight");
  check_close(grads[1], b.grad(), 4 * layout.tolerance, "d_bias");
}

}  // namespace

TEST_CASE("add_layer_norm kernels, emulated, equal float64 arithmetic in every layout",
          "[kernels][emulated]") {
  for (const auto& layout : layouts()) {
    // A block's 8 rows not all used, widths with a ragged last warp pass (37) and GPT-2 XL's;
    // 200 rows: the parameter gradients in 3 chunks.
    check_layout(layout, 15, 48, true);
    check_layout(layout, 15, 37, false);
    check_layout(layout, 9, 1600, true);
    check_layout(layout, 200, 48, false);
  }
}
