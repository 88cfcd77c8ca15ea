// Tensors and their metadata in PyTorch's zip container, the file torch.save writes and
// torch.load reads: written straight from host memory to disk, read back in place from a map.
#pragma once

#include "ampt/checkpoint/atomic_file.h"

#include <ATen/core/ivalue.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace ampt::checkpoint {

// Writes one archive atomically (an AtomicFile): first every tensor, each a stored (uncompressed)
// zip record whose bytes start 64-byte aligned, then the pickled root object that refers to
// them, then the zip index. No copy of the tensors is made and each record's CRC-32 is computed
// once, piece by piece as it is written, for its zip header and for the caller. Python reads the result
// with torch.load(path, weights_only=True) (mmap=True works too); its dictionaries carry no
// TorchScript type tags. One writer per file, used from one thread; independent writers
// may run on as many threads as there are files (a sharded save).
class TensorArchiveWriter {
 public:
  explicit TensorArchiveWriter(const std::string& path);

  // Writes `tensor`'s bytes as the next record and returns their CRC-32. The tensor must be a
  // contiguous CPU tensor that spans its whole storage (a host snapshot's tensors do); a second
  // tensor on the same storage is not written again.
  uint32_t add(const torch::Tensor& tensor);
  // Pickles `root` (its tensors must all have been added), writes the index and renames the
  // file into place.
  void finish(const c10::IValue& root);

 private:
  struct Record {
    std::string name;
    uint64_t offset = 0;  // of its local header
    uint64_t size = 0;
    uint32_t crc = 0;
  };
  // Writes a local header, the bytes and then the header's CRC; returns the CRC.
  uint32_t write_record(const std::string& name, const void* data, uint64_t size);

  AtomicFile file_;
  std::vector<Record> records_;
  std::unordered_map<const void*, size_t> by_storage_;  // storage → index in records_
};

// What TensorArchiveWriter::add takes: `tensor` itself when it is a contiguous CPU tensor with a
// storage of its own (a host snapshot's tensors are), else a CPU copy that is.
at::Tensor as_record(const at::Tensor& tensor);

// Reads an archive's root object. Its tensors point into a read-only memory map of the file,
// which they keep alive: nothing is copied, pages are read from disk as they are first touched
// (read-ahead is requested for the whole file), and a tensor must not be written in place.
// Throws RuntimeError or c10::Error when the file is not such an archive, or is truncated.
c10::IValue read_tensor_archive(const std::string& path);
// The same, every failure one RuntimeError "<what> '<path>' is truncated or corrupt: ...".
c10::IValue read_tensor_archive(const std::string& path, const std::string& what);

}  // namespace ampt::checkpoint
