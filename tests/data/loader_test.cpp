#include "ampt/core/errors.h"
#include "ampt/data/loader.h"
#include "data/data_fixtures.h"

#include <ATen/Parallel.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <set>

using namespace ampt::data;
using ampt::test::as_vector;
using ampt::test::IndexDataset;

namespace {

LoaderOptions options(int64_t batch_size, int64_t workers, uint64_t seed = 1) {
  LoaderOptions o;
  o.batch_size = batch_size;
  o.seed = seed;
  o.workers = workers;
  o.prefetch = 3;
  return o;
}

// The sample indices of the next `n` batches.
std::vector<std::vector<int64_t>> take(Loader& loader, int n) {
  std::vector<std::vector<int64_t>> batches;
  for (int i = 0; i < n; ++i) batches.push_back(as_vector(loader.next().targets));
  return batches;
}

}  // namespace

TEST_CASE("loader: every sample at most once per epoch, drop_last, a new order each epoch",
          "[data][loader]") {
  const auto data = std::make_shared<IndexDataset>(10);
  Loader loader(data, options(3, 2));
  CHECK(loader.batches_per_epoch() == 3);
  CHECK(loader.state() == LoaderState{0, 0});
  std::vector<std::set<int64_t>> epochs(2);
  for (int e = 0; e < 2; ++e) {
    for (const auto& batch : take(loader, 3)) {
      CHECK(batch.size() == 3);
      epochs[e].insert(batch.begin(), batch.end());
    }
    CHECK(epochs[e].size() == 9);
    CHECK(loader.state() == LoaderState{e + 1, 0});
  }
  const auto batch = loader.next();
  CHECK(batch.inputs.sizes() == torch::IntArrayRef({3, 1}));
  CHECK(loader.state() == LoaderState{2, 1});
}

TEST_CASE("loader: the sequence is a function of the seed alone", "[data][loader]") {
  const auto data = std::make_shared<IndexDataset>(50);
  Loader a(data, options(5, 2, 7)), b(data, options(5, 2, 7)), c(data, options(5, 2, 8));
  const auto first = take(a, 25);
  CHECK(first == take(b, 25));
  CHECK(first != take(c, 25));
  CHECK(std::vector(first.begin(), first.begin() + 10) != std::vector(first.begin() + 10, first.begin() + 20));

  auto in_order = options(5, 0);
  in_order.shuffle = false;
  Loader sequential(data, in_order);
  CHECK(take(sequential, 2) == std::vector<std::vector<int64_t>>{{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}});
}

TEST_CASE("loader: 0 and 2 workers give identical batches", "[data][loader]") {
  const auto data = std::make_shared<IndexDataset>(37);
  Loader synchronous(data, options(4, 0));
  Loader threaded(data, options(4, 2));
  CHECK(take(synchronous, 30) == take(threaded, 30));
  CHECK(synchronous.state() == threaded.state());
}

TEST_CASE("loader: resuming from state() reproduces the remaining batches exactly",
          "[data][loader]") {
  const auto data = std::make_shared<IndexDataset>(23);
  for (const int64_t workers : {0, 2}) {
    INFO("workers " << workers);
    Loader original(data, options(4, workers));  // 5 batches per epoch
    take(original, 7);
    const LoaderState saved = original.state();
    CHECK(saved == LoaderState{1, 2});
    const auto rest = take(original, 9);
    Loader resumed(data, options(4, workers), saved);
    CHECK(resumed.state() == saved);
    CHECK(take(resumed, 9) == rest);
  }
}

TEST_CASE("loader: a gather error surfaces in next(), in order, and stays", "[data][loader]") {
  const auto data = std::make_shared<IndexDataset>(10, 5);
  for (const int64_t workers : {0, 2}) {
    INFO("workers " << workers);
    auto o = options(2, workers);
    o.shuffle = false;
    Loader loader(data, o);
    take(loader, 2);  // samples 0..3 are fine
    CHECK_THROWS_WITH(loader.next(), "cannot read sample 5");
    CHECK_THROWS_WITH(loader.next(), "cannot read sample 5");
    CHECK(loader.state() == LoaderState{0, 2});
  }
}

TEST_CASE("loader: too little data or an impossible resume state are errors", "[data][loader]") {
  const auto data = std::make_shared<IndexDataset>(5);
  auto o = options(8, 2);
  o.name = "training data of tokens:x.bin";
  CHECK_THROWS_WITH(Loader(data, o), "training data of tokens:x.bin has 5 samples, fewer than one "
                                     "batch of batch_size 8; lower batch_size or add data");
  CHECK_THROWS_WITH(Loader(data, options(2, 2), LoaderState{0, 2}),
                    Catch::Contains("cannot resume at epoch 0 position 2: an epoch has 2 batches"));
}

TEST_CASE("loader: destroyed with a full queue and busy workers, it does not hang",
          "[data][loader]") {
  const auto data = std::make_shared<IndexDataset>(1000);
  for (int i = 0; i < 20; ++i) {
    Loader loader(data, options(10, 2));
    if (i % 2 == 0) loader.next();
  }
  SUCCEED();
}

namespace {

// Records the largest intra-op thread count any gather saw.
class ThreadCountDataset final : public Dataset {
 public:
  int64_t size() const override { return 64; }
  Batch gather(const std::vector<int64_t>& indices) const override {
    const int threads = at::get_num_threads();
    int seen = seen_.load();
    while (threads > seen && !seen_.compare_exchange_weak(seen, threads)) {
    }
    const auto n = static_cast<int64_t>(indices.size());
    return {torch::zeros({n, 1}), torch::zeros({n}, torch::kInt64)};
  }
  mutable std::atomic<int> seen_{0};
};

}  // namespace

TEST_CASE("loader: workers gather on one thread and leave the training thread's count alone",
          "[data][loader]") {
  // ctest runs these tests with OMP_NUM_THREADS=1: ask for two so that a worker would inherit two.
  const int before = at::get_num_threads();
  at::set_num_threads(2);
  const auto data = std::make_shared<ThreadCountDataset>();
  {
    Loader loader(data, options(4, 2));
    take(loader, 8);
  }
  CHECK(data->seen_ == 1);
  CHECK(at::get_num_threads() == 2);
  at::set_num_threads(before);
}

TEST_CASE("loader: rebatch carries a saved position over to another batch shape",
          "[data][loader]") {
  // 100 samples; 3 global batches of 16 taken: sample 48.
  const auto exact = rebatch({0, 3}, 16, 8, 100);
  CHECK(exact.state == LoaderState{0, 6});
  CHECK(exact.sample == 48);
  CHECK(exact.samples_read_again == 0);
  const auto rounded = rebatch({0, 3}, 16, 20, 100);
  CHECK(rounded.state == LoaderState{0, 2});
  CHECK(rounded.samples_read_again == 8);
  // 96 samples taken in batches of 32 leave 4, less than a batch of 48: the next epoch.
  const auto rolled = rebatch({2, 3}, 32, 48, 100);
  CHECK(rolled.state == LoaderState{3, 0});
  CHECK(rolled.samples_read_again == 0);
}

TEST_CASE("loader: two shards of 4 stopped and resumed as one loader of 4 read on where they stopped",
          "[data][loader]") {
  const auto data = std::make_shared<IndexDataset>(64);
  std::vector<int64_t> seen;  // the permutation's order: shard 0's batch, then shard 1's
  LoaderState saved;
  {
    auto o0 = options(4, 0);
    o0.shard_count = 2;
    auto o1 = o0;
    o1.shard_rank = 1;
    Loader shard0(data, o0);
    Loader shard1(data, o1);
    for (int b = 0; b < 3; ++b) {
      for (auto* shard : {&shard0, &shard1}) {
        const auto part = as_vector(shard->next().targets);
        seen.insert(seen.end(), part.begin(), part.end());
      }
    }
    saved = shard0.state();
  }
  const auto moved = rebatch(saved, 8, 4, data->size());
  Loader single(data, options(4, 0), moved.state);
  for (const auto& batch : take(single, 4)) seen.insert(seen.end(), batch.begin(), batch.end());
  // 40 samples of one epoch's permutation: each once, as an unsharded loader would give them.
  Loader reference(data, options(4, 0));
  std::vector<int64_t> expected;
  for (const auto& batch : take(reference, 10)) expected.insert(expected.end(), batch.begin(), batch.end());
  CHECK(seen == expected);
}
