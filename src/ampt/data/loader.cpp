#include "ampt/data/loader.h"

#include "ampt/core/errors.h"
#include "ampt/data/seed.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <torch/cuda.h>

#include <algorithm>
#include <numeric>

namespace ampt::data {
namespace {

// A worker's tensor ops run on its own thread only. Left to itself, each worker would start an
// OpenMP team of its own; libgomp then counts more threads than cores and sends the training
// thread's team to sleep after every parallel region, a futex wake per op (measured: half the
// CPU throughput of the mlp preset, ~100 context switches per step). omp_set_num_threads is
// per-thread and comes from the libgomp that libtorch loaded; a torch without OpenMP has none.
void use_one_intra_op_thread() {
  // libtorch sets a thread's count when the thread first asks for it (from its own copy of an
  // inline function, not the one compiled here): ask once, so that its setting comes first.
  at::get_num_threads();
  using SetNumThreads = void (*)(int);
  static const auto set_num_threads =
      reinterpret_cast<SetNumThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  if (set_num_threads != nullptr) set_num_threads(1);
}

}  // namespace

Rebatched rebatch(LoaderState saved, int64_t saved_batch_samples, int64_t batch_samples,
                  int64_t dataset_size) {
  Rebatched out;
  out.sample = saved.position * saved_batch_samples;
  out.state = {saved.epoch, out.sample / batch_samples};
  out.samples_read_again = out.sample % batch_samples;
  if (out.state.position >= dataset_size / batch_samples) {
    out.state = {saved.epoch + 1, 0};  // what is left of the epoch is less than a batch
    out.samples_read_again = 0;
  }
  return out;
}

Loader::Loader(std::shared_ptr<const Dataset> dataset, LoaderOptions options, LoaderState start)
    : dataset_(std::move(dataset)),
      options_(std::move(options)),
      batches_per_epoch_(
          (dataset_->size() +
           (options_.keep_last ? options_.batch_size * options_.shard_count - 1 : 0)) /
          (options_.batch_size * options_.shard_count)),
      start_(start.epoch * batches_per_epoch_ + start.position),
      // Pinned host memory is what lets the copy to the GPU run asynchronously.
      pin_(options_.device.is_cuda() && torch::cuda::is_available()) {
  if (batches_per_epoch_ == 0 && options_.shard_count > 1) {
    throw RuntimeError(fmt::format(
        "{} has {} samples, fewer than one global batch of batch_size {} x {} ranks; lower "
        "batch_size or add data",
        options_.name, dataset_->size(), options_.batch_size, options_.shard_count));
  }
  if (batches_per_epoch_ == 0) {
    throw RuntimeError(fmt::format(
        "{} has {} samples, fewer than one batch of batch_size {}; lower batch_size or add data",
        options_.name, dataset_->size(), options_.batch_size));
  }
  if (start.epoch < 0 || start.position < 0 || start.position >= batches_per_epoch_) {
    throw RuntimeError(fmt::format(
        "{}: cannot resume at epoch {} position {}: an epoch has {} batches (did the data change?)",
        options_.name, start.epoch, start.position, batches_per_epoch_));
  }
  try {
    for (int64_t i = 0; i < options_.workers; ++i) workers_.emplace_back([this] { work(); });
  } catch (...) {
    stop();  // no destructor runs for a half-built object: join the threads that did start
    throw;
  }
}

Loader::~Loader() { stop(); }

void Loader::stop() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  room_.notify_all();
  for (auto& worker : workers_) worker.join();
}

LoaderState Loader::state() const {
  std::lock_guard lock(mutex_);
  const int64_t next = start_ + delivered_;
  return {next / batches_per_epoch_, next % batches_per_epoch_};
}

std::shared_ptr<const std::vector<int64_t>> Loader::permutation(int64_t epoch) {
  std::lock_guard lock(permutation_mutex_);
  if (auto found = permutations_.find(epoch); found != permutations_.end()) return found->second;
  auto order = std::make_shared<std::vector<int64_t>>(static_cast<size_t>(dataset_->size()));
  if (options_.shuffle) {
    auto generator = at::detail::createCPUGenerator(mix_seed(options_.seed, epoch));
    const auto drawn = torch::randperm(dataset_->size(), generator, torch::kInt64);
    std::copy_n(drawn.data_ptr<int64_t>(), order->size(), order->begin());
  } else {
    std::iota(order->begin(), order->end(), int64_t{0});
  }
  // Keep this epoch and the one before (a batch straddling the boundary may still need it); an
  // older one that a slow worker asks for again is recomputed: the same order, only extra work.
  std::erase_if(permutations_, [epoch](const auto& entry) { return entry.first < epoch - 1; });
  permutations_.emplace(epoch, order);
  return order;
}

std::vector<int64_t> Loader::indices(int64_t ticket) {
  const int64_t batch = start_ + ticket;
  const auto order = permutation(batch / batches_per_epoch_);
  const int64_t first =
      ((batch % batches_per_epoch_) * options_.shard_count + options_.shard_rank) *
      options_.batch_size;
  const auto size = static_cast<int64_t>(order->size());
  return {order->begin() + std::min(first, size),
          order->begin() + std::min(first + options_.batch_size, size)};
}

Batch Loader::gather(int64_t ticket) {
  Batch batch = dataset_->gather(indices(ticket));
  if (pin_) {
    const auto pinned = [](const torch::Tensor& t) { return t.defined() ? t.pin_memory() : t; };
    batch = {pinned(batch.inputs), pinned(batch.targets), pinned(batch.positions),
             pinned(batch.starts), pinned(batch.pair_runs), pinned(batch.pair_ids)};
  }
  return batch;
}

void Loader::work() {
  use_one_intra_op_thread();
  for (;;) {
    int64_t ticket = 0;
    {
      std::unique_lock lock(mutex_);
      room_.wait(lock, [this] { return stop_ || assigned_ < delivered_ + options_.prefetch; });
      if (stop_) return;
      ticket = assigned_++;
    }
    Slot slot;
    try {
      slot.batch = gather(ticket);
    } catch (...) {
      slot.error = std::current_exception();
    }
    {
      std::lock_guard lock(mutex_);
      slots_.emplace(ticket, std::move(slot));
    }
    ready_.notify_all();
  }
}

Batch Loader::next() {
  Batch batch;
  if (workers_.empty()) {
    batch = gather(delivered_);
    std::lock_guard lock(mutex_);
    ++delivered_;
  } else {
    std::unique_lock lock(mutex_);
    if (failed_) std::rethrow_exception(failed_);
    ready_.wait(lock, [this] { return slots_.contains(delivered_); });
    auto slot = slots_.extract(delivered_);
    if (slot.mapped().error) {
      failed_ = slot.mapped().error;
      std::rethrow_exception(failed_);
    }
    batch = std::move(slot.mapped().batch);
    ++delivered_;
    lock.unlock();
    room_.notify_all();
  }
  const auto moved = [&](const torch::Tensor& t) {
    return t.defined() ? t.to(options_.device, /*non_blocking=*/true) : t;
  };
  return {moved(batch.inputs), moved(batch.targets), moved(batch.positions),
          moved(batch.starts), moved(batch.pair_runs), moved(batch.pair_ids)};
}

}  // namespace ampt::data
