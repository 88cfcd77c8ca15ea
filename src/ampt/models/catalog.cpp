#include "ampt/models/catalog.h"

#include "ampt/core/errors.h"
#include "ampt/hf/hub_cache.h"
#include "ampt/hf/peft_adapter.h"
#include "ampt/hf/pretrained.h"
#include "ampt/models/model_family.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>

namespace ampt::models {
namespace {

std::string pretrained_model(const std::string& init_from, const std::string& hub_cache) {
  std::string dir;
  try {
    dir = hf::pretrained_dir(init_from, hub_cache);
  } catch (const RuntimeError&) {
    // Loading it names what was searched, with the command that fetches it.
    return find_family("gpt")->name;
  }
  const auto type = hf::model_type(dir);
  std::vector<std::string> loaded;
  for (const auto& family : model_families()) {
    if (const auto found = family.hf_model_types.find(type); found != family.hf_model_types.end()) {
      return found->second;
    }
    for (const auto& [known, model] : family.hf_model_types) {
      if (!known.empty()) loaded.push_back(known);
    }
  }
  const auto last = loaded.back();
  loaded.pop_back();
  throw RuntimeError(fmt::format("{}: model_type is {}; ampt loads {} and {} models",
                                 (std::filesystem::path(dir) / "config.json").string(), type,
                                 fmt::join(loaded, ", "), last));
}

std::optional<config::AdapterSettings> adapter(const std::string& dir) {
  if (!hf::is_peft_adapter(dir)) return std::nullopt;
  return hf::read_peft_adapter_config(dir);
}

}  // namespace

const config::Catalog& catalog() {
  static const config::Catalog table{model_names(), pretrained_model, adapter};
  return table;
}

}  // namespace ampt::models
