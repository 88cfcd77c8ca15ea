#include "ampt/checkpoint/sharded_save.h"

#include "ampt/checkpoint/atomic_file.h"
#include "ampt/checkpoint/tensor_archive.h"
#include "ampt/core/errors.h"

#include <fmt/format.h>

#include <filesystem>
#include <sstream>

namespace ampt::checkpoint {
namespace {

namespace fs = std::filesystem;

std::string shard_file_name(int64_t rank) { return fmt::format("rank-{:05}.pt", rank); }

// One archive: {"format": format, "tensors": {name: tensor}}, its records' checksums returned.
ManifestFile write_archive(const fs::path& directory, const std::string& file,
                           const std::string& format, const NamedTensors& tensors) {
  TensorArchiveWriter archive((directory / file).string());
  ManifestFile written{file, {}};
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, tensor] : tensors) {
    const auto record = as_record(tensor);
    written.records[name] = archive.add(record);
    dict.insert(name, record);
  }
  c10::impl::GenericDict root(c10::StringType::get(), c10::AnyType::get());
  root.insert("format", format);
  root.insert("tensors", dict);
  archive.finish(root);
  return written;
}

// "ok" and a line per record ("name crc"), or "error" and the message.
std::string report_of(const ManifestFile& file) {
  std::string text = "ok\n";
  for (const auto& [name, crc] : file.records) text += fmt::format("{} {}\n", name, crc);
  return text;
}

ManifestFile parse_report(const std::string& text, int64_t rank) {
  std::istringstream in(text);
  std::string status;
  std::getline(in, status);
  if (status != "ok") {
    throw RuntimeError(fmt::format("rank {} could not write its shard: {}", rank,
                                   text.substr(text.find('\n') + 1)));
  }
  ManifestFile file{shard_file_name(rank), {}};
  std::string name;
  uint32_t crc = 0;
  while (in >> name >> crc) file.records[name] = crc;
  return file;
}

}  // namespace

std::string save_sharded(const std::string& directory, const ShardedSave& save, int64_t keep,
                         const GatherReports& gather) {
  const auto dir = fs::path(directory) / checkpoint_dir_name(save.meta.step);
  std::vector<std::string> reports;
  try {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw RuntimeError("cannot create '" + dir.string() + "': " + ec.message());
    // Only this rank's own: the others are writing theirs into the same directory.
    remove_stale_temporaries(dir.string(), shard_file_name(save.rank));
    const auto mine = write_archive(dir, shard_file_name(save.rank), kShardFormat, save.shard);
    if (save.rank == 0) {
      remove_stale_temporaries(directory);
      remove_stale_temporaries(dir.string(), kCommonFile);
      remove_stale_temporaries(dir.string(), kManifestName);
      write_checkpoint_file((dir / kCommonFile).string(), save.meta);
    }
    reports = gather(report_of(mine));
  } catch (const RuntimeError& error) {
    // The others wait for this rank's report: they learn of the failure instead of timing out.
    if (save.rank != 0) gather(std::string("error\n") + message_of(error));
    throw;
  }
  if (save.rank != 0) return dir.string();

  Manifest manifest;
  manifest.step = save.meta.step;
  manifest.layout = save.layout;
  for (size_t r = 0; r < reports.size(); ++r) {
    manifest.shards.push_back(parse_report(reports[r], static_cast<int64_t>(r)));
  }
  write_file_atomically((dir / kManifestName).string(), manifest_json(manifest));
  write_latest(directory, checkpoint_dir_name(save.meta.step));
  remove_old_checkpoints(directory, dir.string(), keep);
  return dir.string();
}

}  // namespace ampt::checkpoint
