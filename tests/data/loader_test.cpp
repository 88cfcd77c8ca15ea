#include "ampt/core/errors.h"
#include "ampt/data/loader.h"
#include "data/data_fixtures.h"
#include "support/process.h"

#include <ATen/Parallel.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <set>
#include <thread>

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

namespace {

// Sleeps in every gather, and counts the gathers begun and ended.
class SlowDataset final : public Dataset {
 public:
  explicit SlowDataset(std::chrono::milliseconds pause) : pause_(pause) {}
  int64_t size() const override { return 1000; }
  Batch gather(const std::vector<int64_t>& indices) const override {
    ++begun;
    std::this_thread::sleep_for(pause_);
    Batch batch;
    batch.targets = torch::tensor(indices, torch::kInt64);
    batch.inputs = batch.targets.to(torch::kFloat32).unsqueeze(1);
    ++ended;
    return batch;
  }
  mutable std::atomic<int> begun{0};
  mutable std::atomic<int> ended{0};

 private:
  std::chrono::milliseconds pause_;
};

// Destroys `loader` on a thread of its own: the seconds that took, or a failure when it has not
// returned after `limit` (the thread is then left blocked, so that the test ends).
double seconds_to_destroy(std::unique_ptr<Loader> loader, double limit) {
  std::promise<double> done;
  auto finished = done.get_future();
  std::thread([loader = std::move(loader), done = std::move(done)]() mutable {
    const auto start = std::chrono::steady_clock::now();
    loader.reset();
    done.set_value(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }).detach();
  if (finished.wait_for(std::chrono::duration<double>(limit)) != std::future_status::ready) {
    FAIL("the loader's destructor has not returned after " << limit << " s");
  }
  return finished.get();
}

}  // namespace

TEST_CASE("loader: destroyed with a full queue or busy workers, it stops them at once and joins "
          "them", "[data][loader]") {
  // A full queue: both workers wait for room, which never comes. Measured, the destructor
  // returns in 0.3 ms; 1 s leaves a loaded machine room.
  auto full = std::make_shared<SlowDataset>(std::chrono::milliseconds(5));
  auto loader = std::make_unique<Loader>(full, options(10, 2));
  REQUIRE(ampt::test::wait_until([&] { return full->ended == 3; }, 10.0));  // prefetch 3
  const double full_seconds = seconds_to_destroy(std::move(loader), 10.0);
  CHECK(full_seconds < 1.0);
  CHECK(full->begun == 3);

  // Both workers mid-gather: the destructor waits for those two (1 s), and no worker takes
  // another ticket.
  auto busy = std::make_shared<SlowDataset>(std::chrono::seconds(1));
  loader = std::make_unique<Loader>(busy, options(10, 2));
  REQUIRE(ampt::test::wait_until([&] { return busy->begun == 2; }, 10.0));
  const double busy_seconds = seconds_to_destroy(std::move(loader), 10.0);
  CHECK(busy_seconds < 5.0);
  CHECK(busy->begun == 2);
  CHECK(busy->ended == 2);  // joined: no gather runs on after the destructor
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
