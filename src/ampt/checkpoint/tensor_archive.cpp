#include "ampt/checkpoint/tensor_archive.h"

#include "ampt/checkpoint/crc32.h"
#include "ampt/core/errors.h"
#include "ampt/core/mapped_file.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/csrc/jit/serialization/unpickler.h>

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <memory>

namespace ampt::checkpoint {
namespace {

// The zip container as PyTorchStreamWriter lays it out: every entry stored, its data 64-byte
// aligned by a padding extra field ("FB", as torch pads), ZIP64 sizes and offsets throughout so
// that one layout serves any size. Fields are little-endian.
constexpr char kArchive[] = "archive/";
constexpr uint64_t kRecordAlignment = 64;
constexpr uint16_t kZipVersion = 45;  // 4.5: ZIP64
constexpr uint16_t kDosDate = (0 << 9) | (1 << 5) | 1;  // 1980-01-01: the files are reproducible
constexpr uint32_t kUseZip64 = 0xFFFFFFFFU;
// A record's bytes are checksummed and written this much at a time: the piece is still in the
// CPU's cache when write(2) copies it, and the disk writes earlier pieces meanwhile.
constexpr uint64_t kWritePiece = uint64_t{4} << 20;

class LittleEndian {
 public:
  LittleEndian& u16(uint16_t v) { return put(v, 2); }
  LittleEndian& u32(uint32_t v) { return put(v, 4); }
  LittleEndian& u64(uint64_t v) { return put(v, 8); }
  LittleEndian& text(const std::string& s) {
    bytes_ += s;
    return *this;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  LittleEndian& put(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) bytes_.push_back(static_cast<char>((v >> (8 * i)) & 0xFFU));
    return *this;
  }
  std::string bytes_;
};

// Reads through the caller's map: the zip index is parsed without copying the file.
class MappedReader final : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit MappedReader(std::shared_ptr<const MappedFile> file) : file_(std::move(file)) {}
  size_t size() const override { return file_->size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* what) const override {
    if (pos >= file_->size()) return 0;
    n = std::min<size_t>(n, file_->size() - pos);
    std::memcpy(buf, file_->data() + pos, n);
    return n;
  }

 private:
  std::shared_ptr<const MappedFile> file_;
};

struct Span {
  const uint8_t* data = nullptr;
  size_t size = 0;
};

Span record(caffe2::serialize::PyTorchStreamReader& reader, const MappedFile& file,
            const std::string& name) {
  if (!reader.hasRecord(name)) throw RuntimeError("it has no record '" + name + "'");
  const size_t offset = reader.getRecordOffset(name);
  const size_t size = reader.getRecordSize(name);
  if (offset > file.size() || size > file.size() - offset) {
    throw RuntimeError("record '" + name + "' runs past the end of the file");
  }
  return {file.data() + offset, size};
}

// The unpickler sizes a storage from the pickle's element count: it must fit in its record.
void check_storages(const c10::IValue& value,
                    const std::unordered_map<const void*, size_t>& records) {
  if (value.isTensor()) {
    const auto& storage = value.toTensor().storage();
    if (storage.nbytes() == 0) return;
    const auto it = records.find(storage.data());
    if (it == records.end() || storage.nbytes() > it->second) {
      throw RuntimeError("a tensor's record is shorter than the tensor");
    }
  } else if (value.isGenericDict()) {
    for (const auto& entry : value.toGenericDict()) check_storages(entry.value(), records);
  } else if (value.isList()) {
    for (const auto& element : value.toListRef()) check_storages(element, records);
  } else if (value.isTuple()) {
    for (const auto& element : value.toTupleRef().elements()) check_storages(element, records);
  }
}

}  // namespace

TensorArchiveWriter::TensorArchiveWriter(const std::string& path) : file_(path) {}

uint32_t TensorArchiveWriter::write_record(const std::string& name, const void* data,
                                           uint64_t size) {
  const uint64_t offset = file_.size();
  const uint64_t fixed = 30 + name.size() + 20 + 4;  // header, name, ZIP64 field, padding's header
  const auto padding =
      static_cast<uint16_t>((kRecordAlignment - (offset + fixed) % kRecordAlignment) % kRecordAlignment);
  LittleEndian header;
  header.u32(0x04034b50).u16(kZipVersion).u16(0).u16(0).u16(0).u16(kDosDate).u32(0);
  header.u32(kUseZip64).u32(kUseZip64).u16(static_cast<uint16_t>(name.size()));
  header.u16(static_cast<uint16_t>(20 + 4 + padding)).text(name);
  header.u16(0x0001).u16(16).u64(size).u64(size);
  header.u16(0x4246).u16(padding).text(std::string(padding, 'Z'));
  file_.write(header.bytes().data(), header.bytes().size());
  const auto* bytes = static_cast<const char*>(data);
  uint32_t crc = 0;
  for (uint64_t done = 0; done < size;) {
    const uint64_t piece = std::min(kWritePiece, size - done);
    crc = crc32(crc, bytes + done, piece);
    file_.write(bytes + done, piece);
    done += piece;
  }
  LittleEndian crc_field;
  crc_field.u32(crc);
  file_.write_at(offset + 14, crc_field.bytes().data(), 4);  // the header's CRC, now known
  records_.push_back({name, offset, size, crc});
  return crc;
}

uint32_t TensorArchiveWriter::add(const torch::Tensor& tensor) {
  const auto& storage = tensor.storage();
  if (!tensor.device().is_cpu() || !tensor.is_contiguous() || tensor.storage_offset() != 0 ||
      storage.nbytes() != tensor.nbytes()) {
    throw RuntimeError(
        "tensor archive: a record must be a contiguous CPU tensor spanning its storage");
  }
  const void* key = storage.unsafeGetStorageImpl();
  if (const auto it = by_storage_.find(key); it != by_storage_.end()) {
    return records_[it->second].crc;
  }
  by_storage_.emplace(key, records_.size());
  return write_record(kArchive + ("data/" + std::to_string(records_.size())), tensor.data_ptr(),
                      tensor.nbytes());
}

void TensorArchiveWriter::finish(const c10::IValue& root) {
  std::string pickle;
  // Storages are named by the records add() wrote; plain dictionaries (no TorchScript type
  // tags) keep torch.load's weights_only unpickler content.
  torch::jit::Pickler pickler(
      [&pickle](const char* data, size_t size) { pickle.append(data, size); }, nullptr, nullptr,
      nullptr,
      [this](const at::Tensor& tensor) {
        const auto it = by_storage_.find(tensor.storage().unsafeGetStorageImpl());
        if (it == by_storage_.end()) {
          throw RuntimeError("tensor archive: the root refers to a tensor that was not added");
        }
        return std::to_string(it->second);
      },
      /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(root);
  pickler.stop();
  const auto small = [this](const std::string& name, const std::string& bytes) {
    write_record(kArchive + name, bytes.data(), bytes.size());
  };
  small("data.pkl", pickle);
  small("byteorder", "little");
  small("version", "3\n");

  const uint64_t directory_offset = file_.size();
  LittleEndian index;
  for (const auto& r : records_) {
    index.u32(0x02014b50).u16(kZipVersion).u16(kZipVersion).u16(0).u16(0).u16(0).u16(kDosDate);
    index.u32(r.crc).u32(kUseZip64).u32(kUseZip64).u16(static_cast<uint16_t>(r.name.size()));
    index.u16(4 + 24).u16(0).u16(0).u16(0).u32(0).u32(kUseZip64).text(r.name);
    index.u16(0x0001).u16(24).u64(r.size).u64(r.size).u64(r.offset);
  }
  const uint64_t directory_size = index.bytes().size();
  const uint64_t end64_offset = directory_offset + directory_size;
  index.u32(0x06064b50).u64(44).u16(kZipVersion).u16(kZipVersion).u32(0).u32(0);
  index.u64(records_.size()).u64(records_.size()).u64(directory_size).u64(directory_offset);
  index.u32(0x07064b50).u32(0).u64(end64_offset).u32(1);
  index.u32(0x06054b50).u16(0).u16(0).u16(0xFFFF).u16(0xFFFF).u32(kUseZip64).u32(kUseZip64).u16(0);
  file_.write(index.bytes().data(), index.bytes().size());
  file_.commit();
}

at::Tensor as_record(const at::Tensor& tensor) {
  auto t = tensor.detach();
  const bool whole = t.device().is_cpu() && t.is_contiguous() && t.storage_offset() == 0 &&
                     t.storage().nbytes() == t.nbytes();
  return whole ? t : t.to(torch::kCPU).clone(torch::MemoryFormat::Contiguous);
}

c10::IValue read_tensor_archive(const std::string& path) {
  auto file = std::make_shared<const MappedFile>(path);
  // Start reading the whole file ahead of the tensors' first touch.
  ::madvise(const_cast<uint8_t*>(file->data()), file->size(), MADV_WILLNEED);
  caffe2::serialize::PyTorchStreamReader reader(std::make_shared<MappedReader>(file));
  const auto pickle = record(reader, *file, "data.pkl");
  size_t position = 0;
  std::unordered_map<const void*, size_t> records;
  using Owner = std::shared_ptr<const MappedFile>;
  torch::jit::Unpickler unpickler(
      [&](char* buffer, size_t size) {
        size = std::min(size, pickle.size - position);
        std::memcpy(buffer, pickle.data + position, size);
        position += size;
        return size;
      },
      /*type_resolver=*/nullptr, /*obj_loader=*/nullptr,
      [&](const std::string& key) {
        const auto bytes = record(reader, *file, "data/" + key);
        if (reinterpret_cast<uintptr_t>(bytes.data) % kRecordAlignment != 0) {
          throw RuntimeError("record 'data/" + key + "' is not 64-byte aligned");
        }
        auto* data = const_cast<uint8_t*>(bytes.data);
        records[data] = bytes.size;
        return at::DataPtr(data, new Owner(file),
                           [](void* owner) { delete static_cast<Owner*>(owner); },
                           at::Device(at::kCPU));
      },
      /*device=*/std::nullopt);
  unpickler.set_version(reader.version());
  auto root = unpickler.parse_ivalue();
  check_storages(root, records);
  return root;
}

c10::IValue read_tensor_archive(const std::string& path, const std::string& what) {
  try {
    return read_tensor_archive(path);
  } catch (const c10::Error& e) {
    throw RuntimeError(what + " '" + path + "' is truncated or corrupt: " + message_of(e));
  } catch (const RuntimeError& e) {
    throw RuntimeError(what + " '" + path + "' is truncated or corrupt: " + e.what());
  }
}

}  // namespace ampt::checkpoint
