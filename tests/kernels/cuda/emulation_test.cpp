// The CPU emulation of CUDA kernels (tests/support/cuda_emulation) that the other tests here run
// the project's kernels on: blocks, barriers, shuffles and shared memory give a GPU's result, and
// the faults a GPU would hang on or refuse are errors naming the kernel's line.
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <stdexcept>

namespace ampt::kernels::cuda_emulated::faulty {
void divergent_barrier(int* out);
void partial_shuffle(float* out);
void shuffle_not_reached(float* out);
void reverse(const float* x, float* out, bool with_barrier);
void block_sums(const float* x, unsigned blocks, unsigned threads, float* sums, float* seen);
}  // namespace ampt::kernels::cuda_emulated::faulty

namespace faulty = ampt::kernels::cuda_emulated::faulty;

TEST_CASE("cuda emulation: blocks, shuffles, barriers and shared memory as on a GPU",
          "[kernels][emulated]") {
  torch::manual_seed(5);
  // Integers: every order of summation gives the same float.
  const auto x = torch::randint(-50, 50, {3, 256}, torch::kFloat32);
  auto sums = torch::zeros({3});
  auto seen = torch::zeros({3, 256});
  faulty::block_sums(x.data_ptr<float>(), 3, 256, sums.data_ptr<float>(), seen.data_ptr<float>());
  CHECK(torch::equal(sums, x.sum(1)));
  // Each thread read its own block's total after the barrier.
  CHECK(torch::equal(seen, x.sum(1, /*keepdim=*/true).expand({3, 256})));
}

TEST_CASE("cuda emulation: faults are errors naming the kernel's line", "[kernels][emulated]") {
  auto ints = torch::zeros({64}, torch::kInt32);
  CHECK_THROWS_WITH(faulty::divergent_barrier(ints.data_ptr<int>()),
                    Catch::Contains("faulty.cu:12: threads of one block reached different "
                                    "__syncthreads (lines 12 and 15)"));
  auto floats = torch::zeros({32});
  CHECK_THROWS_WITH(faulty::partial_shuffle(floats.data_ptr<float>()),
                    Catch::Contains("faulty.cu:22: a shuffle needs the whole warp"));
  CHECK_THROWS_WITH(faulty::shuffle_not_reached(floats.data_ptr<float>()),
                    Catch::Contains("faulty.cu:28: a shuffle that some threads of the warp never "
                                    "reach"));
  // A block of 2048 threads: CUDA refuses the launch, and check_launch says so.
  CHECK_THROWS_WITH(faulty::block_sums(floats.data_ptr<float>(), 1, 2048, floats.data_ptr<float>(),
                                       floats.data_ptr<float>()),
                    "block_sums kernel launch: invalid configuration argument");
}

TEST_CASE("cuda emulation: a missing barrier shows, every time, as a read before the write",
          "[kernels][emulated]") {
  torch::manual_seed(6);
  for (int run = 0; run < 3; ++run) {
    // New values each time: what an earlier launch left in shared memory is not the answer.
    const auto x = torch::randn({64});
    auto out = torch::zeros({64});
    faulty::reverse(x.data_ptr<float>(), out.data_ptr<float>(), /*with_barrier=*/false);
    CHECK_FALSE(torch::equal(out, x.flip(0)));
    faulty::reverse(x.data_ptr<float>(), out.data_ptr<float>(), /*with_barrier=*/true);
    CHECK(torch::equal(out, x.flip(0)));
  }
}
