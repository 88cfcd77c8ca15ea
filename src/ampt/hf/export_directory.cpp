#include "ampt/hf/export_directory.h"

#include "ampt/core/errors.h"
#include "ampt/hf/tokenizer_export.h"

#include <fmt/format.h>

#include <filesystem>
#include <regex>

namespace ampt::hf {
namespace {

namespace fs = std::filesystem;

bool is_export_file(const fs::directory_entry& entry) {
  static const std::regex shard(R"(model-[0-9]{5}-of-[0-9]{5}\.safetensors)");
  const std::string name = entry.path().filename().string();
  std::error_code error;
  if (!entry.is_regular_file(error)) return false;
  return name == "config.json" || name == "model.safetensors" || name == "model.safetensors.index.json" ||
         name == "adapter_config.json" || name == "adapter_model.safetensors" || is_tokenizer_file(name) ||
         std::regex_match(name, shard) || (name.starts_with(".") && name.find(".tmp-") != std::string::npos);
}

}  // namespace

void check_replaceable(const std::string& dir) {
  std::error_code error;
  if (!fs::is_directory(dir, error)) return;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    if (!is_export_file(entry)) {
      throw UsageError(fmt::format("{} holds {}, which no export writes: an export replaces its "
                                   "directory whole, so name a new directory or an earlier export",
                                   dir, entry.path().filename().string()));
    }
  }
  if (error) throw UsageError(fmt::format("{}: cannot list the directory: {}", dir, error.message()));
}

namespace {

const std::string& checked(const std::string& dir) {
  check_replaceable(dir);
  return dir;
}

}  // namespace

ExportDirectory::ExportDirectory(const std::string& dir) : checkpoint::AtomicDirectory(checked(dir)) {}

}  // namespace ampt::hf
