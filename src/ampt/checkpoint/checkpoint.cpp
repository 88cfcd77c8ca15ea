#include "ampt/checkpoint/checkpoint.h"

#include "ampt/checkpoint/atomic_file.h"
#include "ampt/checkpoint/crc32.h"
#include "ampt/core/errors.h"

#include <fmt/format.h>
#include <torch/serialize.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

namespace ampt::checkpoint {
namespace {

namespace fs = std::filesystem;
constexpr const char* kFormatName = "ampt-checkpoint";
constexpr const char* kLatest = "latest";

c10::Dict<std::string, torch::Tensor> to_dict(const NamedTensors& tensors) {
  c10::Dict<std::string, torch::Tensor> dict;
  for (const auto& [name, tensor] : tensors) dict.insert(name, tensor.detach().cpu().contiguous());
  return dict;
}

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

// The zip container torch writes does not verify its contents on read, so a checksum over every
// tensor's bytes (in file order) is stored beside them and checked on load.
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

std::vector<fs::path> checkpoints_in(const std::string& directory) {
  std::vector<fs::path> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(directory, ec)) {
    const auto name = entry.path().filename().string();
    if (name.starts_with("ckpt-") && name.ends_with(".pt")) found.push_back(entry.path());
  }
  std::sort(found.begin(), found.end());  // zero-padded step numbers sort by step
  return found;
}

}  // namespace

std::string checkpoint_file_name(int64_t step) { return fmt::format("ckpt-{:08}.pt", step); }

std::string save(const std::string& directory, const Checkpoint& c, int64_t keep) {
  std::error_code ec;
  fs::create_directories(directory, ec);
  if (ec) throw RuntimeError("cannot create '" + directory + "': " + ec.message());
  remove_stale_temporaries(directory);

  c10::impl::GenericDict root(c10::StringType::get(), c10::AnyType::get());
  root.insert("format", std::string(kFormatName));
  root.insert("format_version", c.format_version);
  root.insert("ampt_version", c.ampt_version);
  root.insert("git_revision", c.git_revision);
  root.insert("config", c.config);
  root.insert("step", c.step);
  root.insert("data_epoch", c.data_epoch);
  root.insert("data_position", c.data_position);
  root.insert("batch_size", c.batch_size);
  root.insert("world_size", c.world_size);
  root.insert("skipped_steps", c.skipped_steps);
  root.insert("initial_loss", c.initial_loss);
  root.insert("model", to_dict(c.model));
  root.insert("optimizer_kind", c.optimizer_kind);
  root.insert("optimizer", to_dict(c.optimizer));
  if (c.scaler) {
    root.insert("scaler_scale", static_cast<double>(c.scaler->scale));
    root.insert("scaler_growth_tracker", static_cast<int64_t>(c.scaler->growth_tracker));
    root.insert("scaler_hysteresis", static_cast<int64_t>(c.scaler->hysteresis));
  }
  root.insert("cpu_rng", c.cpu_rng);
  if (c.cuda_rng.defined()) root.insert("cuda_rng", c.cuda_rng);
  root.insert("checksum", tensors_checksum(c));

  const auto bytes = torch::pickle_save(root);
  const auto path = (fs::path(directory) / checkpoint_file_name(c.step)).string();
  write_file_atomically(path, std::string_view(bytes.data(), bytes.size()));
  write_file_atomically((fs::path(directory) / kLatest).string(), checkpoint_file_name(c.step) + "\n");

  auto all = checkpoints_in(directory);
  for (size_t i = 0; i + static_cast<size_t>(keep) < all.size(); ++i) fs::remove(all[i], ec);
  return path;
}

Checkpoint load(const std::string& path) {
  const auto bytes = read_whole_file(path, "checkpoint");
  c10::IValue root;
  try {
    root = torch::pickle_load(bytes);
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    throw RuntimeError("checkpoint '" + path + "' is truncated or corrupt: " +
                       what.substr(0, what.find('\n')));
  }
  const Reader r(root, path);
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
  if (r.has("scaler_scale")) {
    c.scaler = precision::LossScalerState{static_cast<float>(r.number("scaler_scale")),
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

std::optional<std::string> find_latest(const std::string& directory) {
  const auto pointer = fs::path(directory) / kLatest;
  if (!fs::exists(pointer)) return std::nullopt;
  const auto bytes = read_whole_file(pointer.string(), "checkpoint pointer");
  std::string name(bytes.begin(), bytes.end());
  name.erase(name.find_last_not_of(" \n\r\t") + 1);
  if (name.empty() || name.find('/') != std::string::npos) {
    throw RuntimeError("checkpoint pointer '" + pointer.string() + "' is corrupt");
  }
  return (fs::path(directory) / name).string();
}

void copy_into(const NamedTensors& saved, const NamedTensors& targets, const std::string& what,
               const std::string& path) {
  // Everything is checked before anything is copied, so a mismatch leaves the model untouched.
  const std::map<std::string, torch::Tensor> by_name(saved.begin(), saved.end());
  std::set<std::string> wanted;
  for (const auto& [name, target] : targets) {
    wanted.insert(name);
    const auto it = by_name.find(name);
    if (it == by_name.end()) {
      throw RuntimeError(fmt::format("checkpoint '{}' has no {} tensor '{}' (shape {}): it was "
                                     "saved from a different model",
                                     path, what, name, shape_text(target)));
    }
    if (it->second.sizes() != target.sizes()) {
      throw RuntimeError(fmt::format("checkpoint '{}': {} tensor '{}' has shape {}, the model "
                                     "expects {}",
                                     path, what, name, shape_text(it->second), shape_text(target)));
    }
  }
  for (const auto& [name, tensor] : saved) {
    if (wanted.count(name) == 0) {
      throw RuntimeError(fmt::format("checkpoint '{}' has {} tensor '{}' that the model lacks: it "
                                     "was saved from a different model",
                                     path, what, name));
    }
  }
  torch::NoGradGuard no_grad;
  for (const auto& [name, target] : targets) target.copy_(by_name.at(name));
}

}  // namespace ampt::checkpoint
