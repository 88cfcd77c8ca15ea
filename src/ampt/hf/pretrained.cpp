#include "ampt/hf/pretrained.h"

#include "ampt/checkpoint/safetensors.h"
#include "ampt/core/errors.h"
#include "ampt/core/json_reader.h"
#include "ampt/core/whole_file.h"
#include "ampt/hf/hub_cache.h"

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

}  // namespace

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
    files.index = index.string();
    for (const auto& entry : map) {
      shards.insert(entry.second.as<std::string>());
      files.shard_of[entry.first.as<std::string>()] = (fs::path(dir) / entry.second.as<std::string>()).string();
    }
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
        "python -c \"from transformers import AutoModelForCausalLM as M; "
        "M.from_pretrained('{}').save_pretrained('{}', safe_serialization=True)\"",
        pickle.string(), dir, dir));
  }
  throw RuntimeError(fmt::format("{}: no model.safetensors or model.safetensors.index.json", dir));
}

void for_each_model_tensor(const ModelFiles& files, const FileTensorVisitor& visit) {
  for (const auto& file : files.weights) {
    std::set<std::string> held;
    checkpoint::for_each_safetensor(file,
                                    [&](const std::string& name, const torch::Tensor& tensor) {
                                      held.insert(name);
                                      visit(name, tensor, file);
                                    });
    for (const auto& [name, shard] : files.shard_of) {
      if (shard == file && held.count(name) == 0) {
        throw RuntimeError(fmt::format("{}: names tensor {} in {}, which does not hold it",
                                       files.index, name, shard));
      }
    }
  }
}

std::map<std::string, std::pair<torch::Tensor, std::string>> read_model_tensors(
    const ModelFiles& files) {
  std::map<std::string, std::pair<torch::Tensor, std::string>> found;
  for_each_model_tensor(files, [&](const std::string& name, const torch::Tensor& tensor,
                                   const std::string& file) { found[name] = {tensor, file}; });
  return found;
}

ModelFiles pretrained_files(const config::Config& config) {
  return model_files(pretrained_dir(config.init_from, config.hf_hub_cache));
}

std::string model_type(const std::string& dir) {
  const auto path = (fs::path(dir) / "config.json").string();
  if (!fs::exists(path)) {
    throw RuntimeError(path + ": missing; a Hugging Face model directory has a config.json beside "
                       "its weights");
  }
  JsonValue root;
  try {
    root = parse_json(read_whole_file(path));
  } catch (const JsonError& e) {
    throw RuntimeError(fmt::format("{}: not JSON ({})", path, e.what()));
  }
  const JsonValue* type = root.find("model_type");
  return type != nullptr && type->kind == JsonValue::Kind::string ? type->string : "";
}

}  // namespace ampt::hf
