#include "ampt/checkpoint/checkpoint.h"

#include "ampt/checkpoint/atomic_file.h"
#include "ampt/checkpoint/checkpoint_reader.h"
#include "ampt/checkpoint/crc32.h"
#include "ampt/checkpoint/host_snapshot.h"
#include "ampt/checkpoint/manifest.h"
#include "ampt/checkpoint/tensor_archive.h"
#include "ampt/core/errors.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

namespace ampt::checkpoint {
namespace {

namespace fs = std::filesystem;
constexpr const char* kFormatName = "ampt-checkpoint";
constexpr const char* kLatest = "latest";

// Writes each tensor as the file's next record and folds it into the checkpoint's checksum
// (see tensors_checksum) from the CRC the record's zip header needs anyway.
class RecordWriter {
 public:
  explicit RecordWriter(TensorArchiveWriter& archive) : archive_(archive) {}
  torch::Tensor add(const torch::Tensor& tensor) {
    auto record = as_record(tensor);
    checksum_ = crc32_combine(checksum_, archive_.add(record), record.nbytes());
    return record;
  }
  c10::Dict<std::string, torch::Tensor> add(const NamedTensors& tensors) {
    c10::Dict<std::string, torch::Tensor> dict;
    for (const auto& [name, tensor] : tensors) {
      checksum_ = crc32(checksum_, name.data(), name.size());
      dict.insert(name, add(tensor));
    }
    return dict;
  }
  int64_t checksum() const { return checksum_; }

 private:
  TensorArchiveWriter& archive_;
  uint32_t checksum_ = 0;
};

// Reading side: every access checks the type, so a foreign pickle gives a clear error.
class Reader {
 public:
  Reader(const c10::IValue& root, std::string path) : path_(std::move(path)) {
    if (!root.isGenericDict()) throw bad("it is not an ampt checkpoint");
    dict_ = root.toGenericDict();
  }

  c10::IValue get(const std::string& key) const {
    const auto it = dict_.find(key);
    if (it == dict_.end()) throw bad("it lacks '" + key + "'");
    return it->value();
  }
  bool has(const std::string& key) const { return dict_.find(key) != dict_.end(); }
  int64_t integer(const std::string& key) const {
    const auto v = get(key);
    if (!v.isInt()) throw bad("'" + key + "' is not an integer");
    return v.toInt();
  }
  double number(const std::string& key) const {
    const auto v = get(key);
    if (!v.isDouble()) throw bad("'" + key + "' is not a number");
    return v.toDouble();
  }
  std::string text(const std::string& key) const {
    const auto v = get(key);
    if (!v.isString()) throw bad("'" + key + "' is not a string");
    return v.toStringRef();
  }
  torch::Tensor tensor(const std::string& key) const {
    const auto v = get(key);
    if (!v.isTensor()) throw bad("'" + key + "' is not a tensor");
    return v.toTensor();
  }
  NamedTensors tensors(const std::string& key) const {
    const auto v = get(key);
    if (!v.isGenericDict()) throw bad("'" + key + "' is not a dictionary of tensors");
    NamedTensors out;
    for (const auto& entry : v.toGenericDict()) {
      if (!entry.key().isString() || !entry.value().isTensor()) {
        throw bad("'" + key + "' is not a dictionary of tensors");
      }
      out.emplace_back(entry.key().toStringRef(), entry.value().toTensor());
    }
    return out;
  }
  RuntimeError bad(const std::string& why) const {
    return RuntimeError("checkpoint '" + path_ + "' cannot be used: " + why);
  }

 private:
  std::string path_;
  c10::impl::GenericDict dict_{c10::StringType::get(), c10::AnyType::get()};
};

// Torch's zip reader does not verify the records it reads, so a checksum over every tensor's
// name and bytes, in this order, is stored beside them and checked on load.
int64_t tensors_checksum(const Checkpoint& c) {
  uint32_t crc = 0;
  const auto add = [&crc](const torch::Tensor& t) {
    const auto bytes = t.detach().cpu().contiguous();
    crc = crc32(crc, bytes.data_ptr(), bytes.nbytes());
  };
  for (const auto* group : {&c.model, &c.optimizer}) {
    for (const auto& [name, tensor] : *group) {
      crc = crc32(crc, name.data(), name.size());
      add(tensor);
    }
  }
  add(c.cpu_rng);
  if (c.cuda_rng.defined()) add(c.cuda_rng);
  return crc;
}

std::string shape_text(const torch::Tensor& t) { return fmt::format("[{}]", fmt::join(t.sizes(), ", ")); }

// Files ckpt-<step>.pt and sharded directories ckpt-<step>, oldest first.
std::vector<fs::path> checkpoints_in(const std::string& directory) {
  std::vector<std::pair<std::string, fs::path>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(directory, ec)) {
    const auto name = entry.path().filename().string();
    if (!name.starts_with("ckpt-")) continue;
    if (name.ends_with(".pt") && entry.is_regular_file(ec)) {
      found.emplace_back(name.substr(0, name.size() - 3), entry.path());
    } else if (entry.is_directory(ec)) {
      found.emplace_back(name, entry.path());
    }
  }
  std::sort(found.begin(), found.end());  // zero-padded step numbers sort by step
  std::vector<fs::path> paths;
  for (auto& [key, path] : found) paths.push_back(std::move(path));
  return paths;
}

// A sharded checkpoint's directory holds files only: each is removed, then the directory.
void remove_checkpoint(const fs::path& path) {
  std::error_code ec;
  std::vector<fs::path> files;
  if (fs::is_directory(path, ec)) {
    for (const auto& entry : fs::directory_iterator(path, ec)) files.push_back(entry.path());
  }
  for (const auto& file : files) fs::remove(file, ec);
  fs::remove(path, ec);
}

}  // namespace

std::string checkpoint_file_name(int64_t step) { return fmt::format("ckpt-{:08}.pt", step); }

std::string checkpoint_dir_name(int64_t step) { return fmt::format("ckpt-{:08}", step); }

void remove_old_checkpoints(const std::string& directory, const std::string& newest, int64_t keep) {
  auto others = checkpoints_in(directory);
  std::erase(others, fs::path(newest));
  for (size_t i = 0; i + static_cast<size_t>(keep) < others.size() + 1; ++i) {
    remove_checkpoint(others[i]);
  }
}

void write_checkpoint_file(const std::string& path, const Checkpoint& c) {
  // The tensors go first, in checksum order, so the checksum is known when the root is pickled.
  TensorArchiveWriter archive(path);
  RecordWriter records(archive);
  c10::impl::GenericDict root(c10::StringType::get(), c10::AnyType::get());
  root.insert("model", records.add(c.model));
  root.insert("optimizer", records.add(c.optimizer));
  root.insert("cpu_rng", records.add(c.cpu_rng));
  if (c.cuda_rng.defined()) root.insert("cuda_rng", records.add(c.cuda_rng));
  root.insert("format", std::string(kFormatName));
  root.insert("format_version", c.format_version);
  root.insert("ampt_version", c.ampt_version);
  root.insert("git_revision", c.git_revision);
  root.insert("config", c.config);
  if (!c.objective.empty()) root.insert("objective", c.objective);
  root.insert("step", c.step);
  root.insert("data_epoch", c.data_epoch);
  root.insert("data_position", c.data_position);
  root.insert("batch_size", c.batch_size);
  root.insert("world_size", c.world_size);
  root.insert("skipped_steps", c.skipped_steps);
  root.insert("initial_loss", c.initial_loss);
  root.insert("optimizer_kind", c.optimizer_kind);
  if (!c.base_fingerprint.empty()) {
    root.insert("base_model", c.base_model);
    root.insert("base_fingerprint", c.base_fingerprint);
  }
  if (!c.reference_data.empty()) root.insert("reference_data", c.reference_data);
  if (c.scaler) {
    root.insert("scaler_scale", static_cast<double>(c.scaler->scale));
    root.insert("scaler_growth_tracker", static_cast<int64_t>(c.scaler->growth_tracker));
    root.insert("scaler_hysteresis", static_cast<int64_t>(c.scaler->hysteresis));
  }
  root.insert("checksum", records.checksum());
  archive.finish(root);
}

std::string save(const std::string& directory, const Checkpoint& c, int64_t keep) {
  std::error_code ec;
  fs::create_directories(directory, ec);
  if (ec) throw RuntimeError("cannot create '" + directory + "': " + ec.message());
  remove_stale_temporaries(directory);
  const auto path = (fs::path(directory) / checkpoint_file_name(c.step)).string();
  write_checkpoint_file(path, c);
  write_latest(directory, checkpoint_file_name(c.step));

  remove_old_checkpoints(directory, path, keep);
  return path;
}

bool is_sharded(const std::string& path) {
  return fs::is_regular_file(fs::path(path) / kManifestName);
}

std::string resolve_path(const std::string& given) {
  std::string path = given;
  if ((fs::is_directory(given) && !is_sharded(given)) || fs::path(given).filename() == kLatest) {
    const auto directory = fs::is_directory(given) ? fs::path(given) : fs::path(given).parent_path();
    const auto latest = find_latest(directory.empty() ? "." : directory.string());
    if (!latest) {
      throw RuntimeError("checkpoint '" + given + "' not found: no " +
                         (directory / kLatest).string() + " pointer (a run directory has one once it saved)");
    }
    path = *latest;
  }
  if (!fs::exists(path)) throw RuntimeError("checkpoint '" + path + "' not found");
  return path;
}

Checkpoint load(const std::string& given) {
  const auto path = resolve_path(given);
  if (is_sharded(path)) return CheckpointReader(path).assemble();
  return load_file(path);
}

Checkpoint load_file(const std::string& path) {
  if (!fs::exists(path)) throw RuntimeError("checkpoint '" + path + "' not found");
  const Reader r(read_tensor_archive(path, "checkpoint"), path);
  if (!r.has("format") || r.text("format") != kFormatName) throw r.bad("it is not an ampt checkpoint");
  Checkpoint c;
  c.format_version = r.integer("format_version");
  if (c.format_version > kFormatVersion) {
    throw RuntimeError(fmt::format(
        "checkpoint '{}' has format version {}, newer than the {} this ampt reads; use a newer ampt",
        path, c.format_version, kFormatVersion));
  }
  c.ampt_version = r.text("ampt_version");
  c.git_revision = r.text("git_revision");
  c.config = r.text("config");
  if (r.has("objective")) c.objective = r.text("objective");
  c.step = r.integer("step");
  c.data_epoch = r.integer("data_epoch");
  c.data_position = r.integer("data_position");
  if (r.has("batch_size")) c.batch_size = r.integer("batch_size");
  if (r.has("world_size")) c.world_size = r.integer("world_size");
  c.skipped_steps = r.integer("skipped_steps");
  c.initial_loss = r.number("initial_loss");
  c.model = r.tensors("model");
  c.optimizer_kind = r.text("optimizer_kind");
  c.optimizer = r.tensors("optimizer");
  if (r.has("base_fingerprint")) {
    c.base_model = r.text("base_model");
    c.base_fingerprint = r.text("base_fingerprint");
  }
  if (r.has("reference_data")) c.reference_data = r.text("reference_data");
  if (r.has("scaler_scale")) {
    c.scaler = SavedScaler{static_cast<float>(r.number("scaler_scale")),
                           static_cast<int32_t>(r.integer("scaler_growth_tracker"))};
    // Checkpoints from before hysteresis existed lack it: the scaler then starts it full.
    if (r.has("scaler_hysteresis")) {
      c.scaler->hysteresis = static_cast<int32_t>(r.integer("scaler_hysteresis"));
    }
  }
  c.cpu_rng = r.tensor("cpu_rng");
  if (r.has("cuda_rng")) c.cuda_rng = r.tensor("cuda_rng");
  if (r.integer("checksum") != tensors_checksum(c)) {
    throw RuntimeError("checkpoint '" + path + "' is corrupt: its tensors do not match their checksum");
  }
  return c;
}

void write_latest(const std::string& directory, const std::string& name) {
  write_file_atomically((fs::path(directory) / kLatest).string(), name + "\n");
}

std::optional<std::string> find_latest(const std::string& directory) {
  const auto pointer = fs::path(directory) / kLatest;
  if (!fs::exists(pointer)) return std::nullopt;
  std::string name = read_checkpoint_file(pointer.string(), "checkpoint pointer");
  name.erase(name.find_last_not_of(" \n\r\t") + 1);
  if (name.empty() || name.find('/') != std::string::npos) {
    throw RuntimeError("checkpoint pointer '" + pointer.string() + "' is corrupt");
  }
  return (fs::path(directory) / name).string();
}

namespace {

RuntimeError missing_tensor(const std::string& path, const std::string& what,
                            const std::string& name, const torch::Tensor& target) {
  return RuntimeError(fmt::format("checkpoint '{}' has no {} tensor '{}' (shape {}): it was saved "
                                  "from a different model",
                                  path, what, name, shape_text(target)));
}

RuntimeError unknown_tensor(const std::string& path, const std::string& what,
                            const std::string& name) {
  return RuntimeError(fmt::format("checkpoint '{}' has {} tensor '{}' that the model lacks: it was "
                                  "saved from a different model",
                                  path, what, name));
}

void require_shape(const std::string& path, const std::string& what, const std::string& name,
                   const torch::Tensor& saved, const torch::Tensor& target) {
  if (saved.sizes() != target.sizes()) {
    throw RuntimeError(fmt::format("checkpoint '{}': {} tensor '{}' has shape {}, the model "
                                   "expects {}",
                                   path, what, name, shape_text(saved), shape_text(target)));
  }
}

}  // namespace

void copy_into(const NamedTensors& saved, const NamedTensors& targets, const std::string& what,
               const std::string& path) {
  // Everything is checked before anything is copied, so a mismatch leaves the model untouched.
  const std::map<std::string, torch::Tensor> by_name(saved.begin(), saved.end());
  std::set<std::string> wanted;
  for (const auto& [name, target] : targets) {
    wanted.insert(name);
    const auto it = by_name.find(name);
    if (it == by_name.end()) throw missing_tensor(path, what, name, target);
    require_shape(path, what, name, it->second, target);
  }
  for (const auto& [name, tensor] : saved) {
    if (wanted.count(name) == 0) throw unknown_tensor(path, what, name);
  }
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> into;
  std::vector<torch::Tensor> from;
  for (const auto& [name, target] : targets) {
    into.push_back(target);
    from.push_back(by_name.at(name));
  }
  copy_tensors(into, from);
}

TensorMatch::TensorMatch(const NamedTensors& targets, std::string what, std::string path)
    : targets_(targets.begin(), targets.end()), what_(std::move(what)), path_(std::move(path)) {}

const torch::Tensor& TensorMatch::target(const std::string& name, const torch::Tensor& tensor) {
  const auto it = targets_.find(name);
  if (it == targets_.end()) throw unknown_tensor(path_, what_, name);
  require_shape(path_, what_, name, tensor, it->second);
  matched_.insert(name);
  return it->second;
}

void TensorMatch::finish() const {
  for (const auto& [name, target] : targets_) {
    if (matched_.count(name) == 0) throw missing_tensor(path_, what_, name, target);
  }
}

}  // namespace ampt::checkpoint
