// Delivers a dataset's batches on the training device, gathered ahead of the model by background
// threads into a bounded queue, in an order that a checkpointed LoaderState reproduces exactly.
#pragma once

#include "ampt/data/dataset.h"

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ampt::data {

struct LoaderOptions {
  int64_t batch_size = 1;
  bool shuffle = true;  // false: samples in dataset order (sequential reading of a token stream)
  uint64_t seed = 0;
  torch::Device device = torch::kCPU;
  int64_t workers = 2;   // gathering threads; 0 gathers inside next() on the caller's thread
  int64_t prefetch = 4;  // batches gathered or being gathered ahead of the consumer, at most
  std::string name = "dataset";  // how errors name the data: "dataset has 10 samples, ..."
  // Data parallelism: each global batch holds shard_count * batch_size samples of the one
  // (seed, epoch) permutation, and this loader delivers slice shard_rank of it; so the ranks
  // together see exactly what one process with the global batch would.
  int64_t shard_rank = 0;
  int64_t shard_count = 1;
  // Validation: the epoch's last, incomplete global batch is delivered too, shared out among
  // the shards as far as it goes (a shard past its end gets a batch of no samples), so that an
  // evaluation of the whole split sees every sample whatever the batch size.
  bool keep_last = false;
};

// Where the loader stands: the epoch and position (batches into that epoch) of the NEXT batch;
// batches are global ones, so every shard has the same state.
struct LoaderState {
  int64_t epoch = 0;
  int64_t position = 0;
  bool operator==(const LoaderState&) const = default;
};

// A state saved by a run whose global batches held `saved_batch_samples` samples (batch_size x
// ranks), carried over to global batches of `batch_samples` out of `dataset_size` samples: the
// same point of the same epoch's permutation, rounded down to a whole batch, or the next epoch
// when this one has no whole batch left.
struct Rebatched {
  LoaderState state;
  int64_t sample = 0;             // where in the epoch's permutation the saved run stopped
  int64_t samples_read_again = 0;  // from the rounding down, fewer than batch_samples
};
Rebatched rebatch(LoaderState saved, int64_t saved_batch_samples, int64_t batch_samples,
                  int64_t dataset_size);

// Epoch e visits the samples in a permutation that is a pure function of (seed, e), batch by batch,
// dropping the last incomplete batch; so the batch sequence depends only on the options and the
// start state, never on the number of workers or on timing.
class Loader {
 public:
  // Throws RuntimeError when the dataset holds fewer samples than one batch, or `start` lies
  // outside an epoch.
  Loader(std::shared_ptr<const Dataset> dataset, LoaderOptions options, LoaderState start = {});
  ~Loader();  // stops and joins the workers; never blocks on a full queue
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The next batch on the device (copied asynchronously from pinned memory on CUDA). An exception
  // thrown while gathering it is rethrown here, and again by every later call.
  Batch next();
  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  LoaderState state() const;

 private:
  struct Slot {
    Batch batch;
    std::exception_ptr error;
  };

  Batch gather(int64_t ticket);  // batch number `ticket` after the start, on the host
  std::vector<int64_t> indices(int64_t ticket);
  std::shared_ptr<const std::vector<int64_t>> permutation(int64_t epoch);
  void work();
  void stop();  // ends and joins the workers

  std::shared_ptr<const Dataset> dataset_;
  LoaderOptions options_;
  int64_t batches_per_epoch_;
  int64_t start_;  // batches before the start state, counted from epoch 0
  bool pin_;

  mutable std::mutex mutex_;
  std::condition_variable room_;   // workers wait for the consumer to make room
  std::condition_variable ready_;  // the consumer waits for its batch
  int64_t assigned_ = 0;           // tickets handed to workers
  int64_t delivered_ = 0;          // tickets returned by next()
  std::map<int64_t, Slot> slots_;  // finished tickets not yet delivered
  std::exception_ptr failed_;
  bool stop_ = false;

  std::mutex permutation_mutex_;
  std::map<int64_t, std::shared_ptr<const std::vector<int64_t>>> permutations_;

  std::vector<std::thread> workers_;
};

}  // namespace ampt::data
