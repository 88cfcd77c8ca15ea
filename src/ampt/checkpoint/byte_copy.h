// Copies between host buffers at the memory's speed, for checkpoint snapshots and loads.
#pragma once

#include <cstddef>
#include <vector>

namespace ampt::checkpoint {

struct ByteCopy {
  void* target;
  const void* source;
  size_t bytes;
};

// Performs every copy, cut into 4 MiB pieces that up to four threads take in turn: on a busy
// machine a helper that gets no time slice holds nobody up (the caller takes its pieces), unlike
// an OpenMP team at its barrier. On x86-64 the stores are non-temporal: a snapshot is not read
// again soon, and bypassing the cache saves the read-for-ownership of every target line. glibc's
// memcpy does that only past a threshold of a few MB, and most of a model's tensors are smaller
// (1.9x faster on one thread for gpt2-124m's 1.49 GB of state on the 2-core CPU machine).
void copy_bytes(const std::vector<ByteCopy>& copies);

}  // namespace ampt::checkpoint
