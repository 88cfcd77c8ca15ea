// The fused classifier's softmax + cross-entropy kernel (src/ampt/kernels/cuda/
// softmax_cross_entropy.cu) emulated on the CPU against float64 arithmetic on the same rounded
// logits: each row's loss, and the gradient written over the logits with the padded columns
// and ignored rows zero.
#include "cuda_emulated/launch.h"
#include "kernels/cuda/kernel_checks.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <string>

using ampt::test::check_close;
using ampt::test::emulated_dtype;
namespace emulated = ampt::kernels::cuda_emulated;

namespace {

constexpr int64_t kIgnore = -100;

void check_rows(c10::ScalarType dtype, int64_t cols, int64_t valid, double tol) {
  INFO(dtype << ", " << valid << " classes in rows of " << cols);
  torch::manual_seed(cols);
  const int64_t rows = 5;
  const auto logits = (torch::randn({rows, cols}) * 4).to(dtype);
  auto targets = torch::randint(0, valid, {rows}, torch::kInt64);
  targets[2] = kIgnore;
  targets[3] = valid - 1;  // the last real class, next to the padding

  // The reference: log-softmax over the real classes in float64.
  const auto x = logits.narrow(1, 0, valid).to(torch::kFloat64);
  const auto lse = x.logsumexp(1, /*keepdim=*/true);
  const auto counted = targets.ne(kIgnore);
  const auto safe = targets.clamp_min(0).unsqueeze(1);
  const auto want_loss = (lse - x.gather(1, safe)).squeeze(1) * counted;
  auto want_grad = torch::zeros({rows, cols}, torch::kFloat64);
  want_grad.narrow(1, 0, valid).copy_((x - lse).exp().scatter_add(
      1, safe, torch::full({rows, 1}, -1.0, torch::kFloat64)));
  want_grad.mul_(counted.unsqueeze(1));

  // Without the gradient the logits stay as they were.
  auto scratch = logits.clone();
  auto row_loss = torch::full({rows}, -1.0f);
  emulated::softmax_cross_entropy(scratch.data_ptr(), emulated_dtype(dtype), rows, cols, valid,
                                  targets.data_ptr<int64_t>(), kIgnore, row_loss.data_ptr<float>(),
                                  false, nullptr);
  check_close(row_loss, want_loss, 1e-5, "loss");
  CHECK(torch::equal(scratch, logits));

  row_loss.fill_(-1.0f);
  emulated::softmax_cross_entropy(scratch.data_ptr(), emulated_dtype(dtype), rows, cols, valid,
                                  targets.data_ptr<int64_t>(), kIgnore, row_loss.data_ptr<float>(),
                                  true, nullptr);
  check_close(row_loss, want_loss, 1e-5, "loss with the gradient");
  check_close(scratch, want_grad, tol, "gradient");
  CHECK(torch::equal(scratch.narrow(1, valid, cols - valid),
                     torch::zeros({rows, cols - valid}, dtype)));
  CHECK(torch::equal(scratch[2], torch::zeros({cols}, dtype)));
}

}  // namespace

TEST_CASE("softmax cross-entropy kernel, emulated, equals float64 arithmetic",
          "[kernels][emulated]") {
  for (const auto dtype : {torch::kFloat32, torch::kBFloat16, torch::kHalf}) {
    const double tol = dtype == torch::kFloat32 ? 1e-6 : dtype == torch::kHalf ? 1e-3 : 8e-3;
    // Fewer classes than a block's 512 threads (most threads see none), more than one pass,
    // and padding columns past the real vocabulary.
    check_rows(dtype, 48, 37, tol);
    check_rows(dtype, 1200, 1200, tol);
    check_rows(dtype, 1216, 1203, tol);
  }
}

TEST_CASE("softmax cross-entropy kernel, emulated: a target outside the real classes reads "
          "nothing outside its row and gives that row a NaN loss and gradient",
          "[kernels][emulated]") {
  torch::manual_seed(11);
  const int64_t rows = 4, cols = 48, valid = 40;
  const auto logits = torch::randn({rows, cols});
  // A padded column, one past the row, a negative id that is not the ignore index, and a good one.
  const auto targets = torch::tensor({valid, cols, int64_t{-7}, int64_t{3}}, torch::kInt64);
  ampt::test::Guarded scratch({rows, cols}, torch::kFloat32, "logits");
  std::memcpy(scratch.data(), logits.data_ptr(), rows * cols * sizeof(float));
  ampt::test::Guarded row_loss({rows}, torch::kFloat32, "row losses");
  emulated::softmax_cross_entropy(scratch.data(), emulated::Dtype::float32, rows, cols, valid,
                                  targets.data_ptr<int64_t>(), kIgnore, row_loss.data<float>(),
                                  true, nullptr);
  const auto loss = row_loss.get(), grad = scratch.get();
  for (int64_t r = 0; r < 3; ++r) {
    INFO("row " << r << ", target " << targets[r].item<int64_t>());
    CHECK(std::isnan(loss[r].item<float>()));
    CHECK(grad[r].isnan().all().item<bool>());
  }
  const auto x = logits[3].narrow(0, 0, valid).to(torch::kFloat64);
  CHECK(loss[3].item<double>() ==
        Approx((x.logsumexp(0) - x[3]).item<double>()).epsilon(1e-5));
}
