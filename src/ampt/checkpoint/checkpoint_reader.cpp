#include "ampt/checkpoint/checkpoint_reader.h"

#include "ampt/checkpoint/atomic_file.h"
#include "ampt/checkpoint/crc32.h"
#include "ampt/checkpoint/host_snapshot.h"
#include "ampt/checkpoint/tensor_archive.h"
#include "ampt/core/errors.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

namespace ampt::checkpoint {
namespace {

namespace fs = std::filesystem;

uint32_t crc_of(const torch::Tensor& t) { return crc32(0, t.data_ptr(), t.nbytes()); }

// An archive's root dictionary, whose "format" must be `format`; else a RuntimeError naming the
// file and saying it is not `what`.
c10::impl::GenericDict read_root(const std::string& path, const std::string& format,
                                 const std::string& what) {
  const auto root = read_tensor_archive(path, "checkpoint file");
  if (!root.isGenericDict()) throw RuntimeError("checkpoint file '" + path + "' is not " + what);
  auto dict = root.toGenericDict();
  const auto it = dict.find("format");
  if (it == dict.end() || !it->value().isString() || it->value().toStringRef() != format) {
    throw RuntimeError("checkpoint file '" + path + "' is not " + what);
  }
  return dict;
}

// The tensors of `key` in `dict` by name, unchecked.
std::map<std::string, torch::Tensor> tensors_of(const c10::impl::GenericDict& dict,
                                                const std::string& key, const std::string& path) {
  std::map<std::string, torch::Tensor> out;
  const auto it = dict.find(key);
  if (it == dict.end() || !it->value().isGenericDict()) {
    throw RuntimeError("checkpoint file '" + path + "' lacks its '" + key + "' tensors");
  }
  for (const auto& entry : it->value().toGenericDict()) {
    if (!entry.key().isString() || !entry.value().isTensor()) {
      throw RuntimeError("checkpoint file '" + path + "': '" + key + "' is not a dictionary of tensors");
    }
    out.emplace(entry.key().toStringRef(), entry.value().toTensor());
  }
  return out;
}

}  // namespace

CheckpointReader::CheckpointReader(const std::string& given) : path_(resolve_path(given)) {
  if (!is_sharded(path_)) {
    meta_ = load_file(path_);
    for (const auto* group : {&meta_.model, &meta_.optimizer}) {
      for (const auto& [name, tensor] : *group) whole_.emplace(name, tensor);
    }
    return;
  }
  const auto manifest_path = (fs::path(path_) / kManifestName).string();
  manifest_ = parse_manifest(read_checkpoint_file(manifest_path, "checkpoint manifest"),
                             manifest_path);
  const auto& names = manifest_->layout.names;
  for (size_t i = 0; i < names.size(); ++i) param_index_.emplace(names[i], static_cast<int64_t>(i));

  // The common file is an ordinary checkpoint file, checked whole: what it holds (the buffers;
  // under expert parallelism the whole experts and their optimizer state) goes by name.
  meta_ = load_file((fs::path(path_) / kCommonFile).string());
  for (const auto* group : {&meta_.model, &meta_.optimizer}) {
    for (const auto& [name, tensor] : *group) whole_.emplace(name, tensor);
  }
  if (meta_.step != manifest_->step || meta_.world_size != manifest_->layout.layout.world_size()) {
    throw RuntimeError(fmt::format("checkpoint '{}' is corrupt: its manifest is of step {} and {} "
                                   "ranks, its common file of step {} and {}",
                                   path_, manifest_->step, manifest_->layout.layout.world_size(),
                                   meta_.step, meta_.world_size));
  }
}

std::optional<CheckpointReader::Located> CheckpointReader::locate(const std::string& name) const {
  if (!manifest_) return std::nullopt;
  if (const auto it = param_index_.find(name); it != param_index_.end()) {
    return Located{it->second, "master", false};
  }
  const auto dot = name.rfind('.');
  if (dot == std::string::npos) return std::nullopt;
  const auto it = param_index_.find(name.substr(0, dot));
  if (it == param_index_.end()) return std::nullopt;
  const auto kind = name.substr(dot + 1);
  if (kind == "master") return std::nullopt;  // the weights go by the parameter's own name
  const auto& l = manifest_->layout;
  if (std::ranges::find(l.per_element, kind) != l.per_element.end()) return Located{it->second, kind, false};
  if (std::ranges::find(l.per_piece, kind) != l.per_piece.end()) return Located{it->second, kind, true};
  return std::nullopt;
}

std::optional<std::vector<int64_t>> CheckpointReader::shape(const std::string& name) const {
  if (const auto it = whole_.find(name); it != whole_.end()) return it->second.sizes().vec();
  const auto found = locate(name);
  if (!found) return std::nullopt;
  if (found->per_piece) return std::vector<int64_t>{};
  return manifest_->layout.shapes[found->param];
}

const torch::Tensor& CheckpointReader::record(int64_t rank, const std::string& kind) {
  const auto& file = manifest_->shards[rank];
  const auto path = (fs::path(path_) / file.file).string();
  if (!shards_.contains(rank)) {
    const auto root = read_root(path, kShardFormat, "an ampt checkpoint shard");
    shards_[rank] = tensors_of(root, "tensors", path);
  }
  auto& tensors = shards_[rank];
  const auto it = tensors.find(kind);
  const auto expected = file.records.find(kind);
  if (it == tensors.end() || expected == file.records.end()) {
    throw RuntimeError(fmt::format("checkpoint '{}' is corrupt: {} has no record '{}'", path_,
                                   file.file, kind));
  }
  if (checked_.emplace(rank, kind).second) {
    const auto& l = manifest_->layout;
    const bool per_piece = std::ranges::find(l.per_piece, kind) != l.per_piece.end();
    const auto numel = per_piece ? static_cast<int64_t>(l.layout.segments(rank).size())
                                 : l.layout.shard_numel();
    if (it->second.numel() != numel || crc_of(it->second) != expected->second) {
      throw RuntimeError(fmt::format("checkpoint '{}' is corrupt: record '{}' of {} does not match "
                                     "its {}",
                                     path_, kind, file.file,
                                     it->second.numel() != numel ? "layout" : "checksum"));
    }
  }
  return it->second;
}

int64_t CheckpointReader::piece_index(int64_t rank, int64_t shard_offset) {
  auto& offsets = piece_offsets_[rank];
  if (offsets.empty()) {
    for (const auto& piece : manifest_->layout.layout.segments(rank)) offsets.push_back(piece.shard_offset);
  }
  return std::lower_bound(offsets.begin(), offsets.end(), shard_offset) - offsets.begin();
}

void CheckpointReader::read(const std::string& name, int64_t begin, int64_t count,
                            const torch::Tensor& out) {
  torch::NoGradGuard no_grad;
  if (const auto it = whole_.find(name); it != whole_.end()) {
    copy_tensors({out}, {it->second.reshape(-1).narrow(0, begin, count)});
    return;
  }
  const auto found = locate(name);
  if (!found) throw RuntimeError("checkpoint '" + path_ + "' has no tensor '" + name + "'");
  const auto& layout = manifest_->layout.layout;
  if (found->per_piece) {
    const auto first = layout.locate(found->param, 0, 1).front();
    out.fill_(record(first.rank, found->kind)[piece_index(first.rank, first.shard_offset)].item());
    return;
  }
  std::vector<torch::Tensor> targets;
  std::vector<torch::Tensor> sources;
  for (const auto& piece : layout.locate(found->param, begin, count)) {
    targets.push_back(out.narrow(0, piece.begin - begin, piece.count));
    sources.push_back(record(piece.rank, found->kind).narrow(0, piece.shard_offset, piece.count));
  }
  copy_tensors(targets, sources);
}

Checkpoint CheckpointReader::assemble() {
  if (!manifest_) return meta_;
  Checkpoint c = meta_;
  const auto& l = manifest_->layout;
  NamedTensors params;
  for (size_t p = 0; p < l.names.size(); ++p) {
    auto whole = torch::empty(l.shapes[p], torch::kFloat32);
    read(l.names[p], 0, whole.numel(), whole.view(-1));
    params.emplace_back(l.names[p], whole);
  }
  // Parameters first, then the buffers, as an ordinary checkpoint lists them.
  c.model.insert(c.model.begin(), params.begin(), params.end());
  for (const auto* kinds : {&l.per_element, &l.per_piece}) {
    for (const auto& kind : *kinds) {
      if (kind == "master") continue;
      for (size_t p = 0; p < l.names.size(); ++p) {
        const auto name = l.names[p] + "." + kind;
        auto whole = torch::empty(*shape(name), torch::kFloat32);
        read(name, 0, std::max<int64_t>(whole.numel(), 1), whole.view(-1));
        c.optimizer.emplace_back(name, whole);
      }
    }
  }
  return c;
}

}  // namespace ampt::checkpoint
