#include "ampt/hf/pretrained.h"

#include "ampt/core/errors.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

namespace ampt::hf {
namespace {

namespace fs = std::filesystem;

// Repository ids a name may be cached under: GPT-2's own sizes moved to openai-community/, and
// the cache keeps whichever id the download used.
std::vector<std::string> repo_ids(const std::string& name) {
  static const std::set<std::string> gpt2 = {"gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl",
                                            "distilgpt2"};
  if (gpt2.contains(name)) return {name, "openai-community/" + name};
  return {name};
}

std::string cache_folder(const std::string& repo_id) {
  std::string folder = "models--" + repo_id;
  for (std::size_t at = folder.find('/'); at != std::string::npos; at = folder.find('/', at)) {
    folder.replace(at, 1, "--");
  }
  return folder;
}

// The snapshot of a cached repository: the revision refs/main names, else the newest snapshot.
std::string snapshot_of(const fs::path& repo) {
  std::ifstream ref(repo / "refs" / "main");
  std::string revision;
  if (ref && std::getline(ref, revision) && fs::is_directory(repo / "snapshots" / revision)) {
    return (repo / "snapshots" / revision).string();
  }
  std::error_code error;
  fs::path newest;
  fs::file_time_type newest_time{};
  for (const auto& entry : fs::directory_iterator(repo / "snapshots", error)) {
    if (!entry.is_directory()) continue;
    const auto time = entry.last_write_time();
    if (newest.empty() || time > newest_time) {
      newest = entry.path();
      newest_time = time;
    }
  }
  return newest.string();
}

}  // namespace

std::string pretrained_dir(const std::string& init_from, const std::string& hub_cache) {
  if (fs::is_directory(init_from)) return init_from;
  const auto ids = repo_ids(init_from);
  std::vector<std::string> looked;
  for (const auto& id : ids) {
    const auto repo = fs::path(hub_cache) / cache_folder(id);
    looked.push_back(repo.filename().string());
    if (hub_cache.empty() || !fs::is_directory(repo)) continue;
    if (auto snapshot = snapshot_of(repo); !snapshot.empty()) return snapshot;
  }
  throw RuntimeError(fmt::format(
      "init_from '{}' is not a directory, and the Hugging Face cache {} has no snapshot of it "
      "(looked for {}); ampt never downloads: fetch it where there is network access "
      "(huggingface-cli download {}) and copy the cache or the model's directory here",
      init_from, hub_cache.empty() ? "(none: HF_HUB_CACHE, HF_HOME and HOME are unset)" : hub_cache,
      fmt::join(looked, " and "), ids.back()));
}

ModelFiles model_files(const std::string& dir) {
  ModelFiles files;
  files.dir = dir;
  files.config_json = (fs::path(dir) / "config.json").string();
  if (!fs::exists(files.config_json)) {
    throw RuntimeError(files.config_json + ": missing; a Hugging Face model directory has a "
                       "config.json beside its weights");
  }
  const auto single = fs::path(dir) / "model.safetensors";
  const auto index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(single)) {
    files.weights = {single.string()};
    return files;
  }
  if (fs::exists(index)) {
    YAML::Node map;
    try {
      map = YAML::LoadFile(index.string())["weight_map"];  // JSON is YAML
    } catch (const YAML::Exception& e) {
      throw RuntimeError(fmt::format("{}: not a safetensors index ({})", index.string(), e.what()));
    }
    if (!map || !map.IsMap() || map.size() == 0) {
      throw RuntimeError(index.string() + ": no weight_map of tensor names to shard files");
    }
    std::set<std::string> shards;
    for (const auto& entry : map) shards.insert(entry.second.as<std::string>());
    for (const auto& shard : shards) {
      const auto path = (fs::path(dir) / shard).string();
      if (!fs::exists(path)) {
        throw RuntimeError(fmt::format("{}: missing, but {} lists it", path, index.string()));
      }
      files.weights.push_back(path);
    }
    return files;
  }
  const auto pickle = fs::path(dir) / "pytorch_model.bin";
  if (fs::exists(pickle)) {
    throw RuntimeError(fmt::format(
        "{}: a pickle, which ampt does not load (it can run code); convert it once with "
        "python -c \"from transformers import GPT2LMHeadModel as M; "
        "M.from_pretrained('{}').save_pretrained('{}', safe_serialization=True)\"",
        pickle.string(), dir, dir));
  }
  throw RuntimeError(fmt::format("{}: no model.safetensors or model.safetensors.index.json", dir));
}

ModelFiles pretrained_files(const config::Config& config) {
  return model_files(pretrained_dir(config.init_from, config.hf_hub_cache));
}

}  // namespace ampt::hf
