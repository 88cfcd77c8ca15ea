#include "ampt/hf/hub_cache.h"

#include "ampt/core/errors.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

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

std::string pretrained_dir(const std::string& init_from, const std::string& hub_cache, std::string_view option) {
  if (fs::is_directory(init_from)) return init_from;
  if (fs::exists(init_from)) {
    // A file is most often a checkpoint of ampt's own, which the cache message would misread.
    throw RuntimeError(fmt::format(
        "{} '{}' is a file, not a model directory: an ampt checkpoint continues its own run with "
        "--resume {}, or becomes a model directory with `ampt export --checkpoint {} --format hf "
        "--out DIR` for {} DIR",
        option, init_from, init_from, init_from, option));
  }
  const auto ids = repo_ids(init_from);
  std::vector<std::string> looked;
  for (const auto& id : ids) {
    const auto repo = fs::path(hub_cache) / cache_folder(id);
    looked.push_back(repo.filename().string());
    if (hub_cache.empty() || !fs::is_directory(repo)) continue;
    if (auto snapshot = snapshot_of(repo); !snapshot.empty()) return snapshot;
  }
  throw RuntimeError(fmt::format(
      "{} '{}' is not a directory, and the Hugging Face cache {} has no snapshot of it "
      "(looked for {}); ampt never downloads: fetch it where there is network access "
      "(huggingface-cli download {}) and copy the cache or the model's directory here",
      option, init_from, hub_cache.empty() ? "(none: HF_HUB_CACHE, HF_HOME and HOME are unset)" : hub_cache,
      fmt::join(looked, " and "), ids.back()));
}

}  // namespace ampt::hf
