#include "ampt/data/dataset_files.h"

#include "ampt/core/errors.h"
#include "ampt/core/json_reader.h"
#include "ampt/data/input_files.h"
#include "ampt/tables/table_file.h"
#include "ampt/text/read_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <map>
#include <optional>
#include <string_view>
#include <system_error>

namespace ampt::data {
namespace {

namespace fs = std::filesystem;

enum class Split { train, validation, test };

// datasets' split keywords (datasets.data_files' SPLIT_KEYWORDS).
std::optional<Split> split_of_word(std::string_view word) {
  static constexpr std::array<std::pair<std::string_view, Split>, 10> kWords{{
      {"train", Split::train}, {"training", Split::train},
      {"validation", Split::validation}, {"valid", Split::validation}, {"val", Split::validation},
      {"dev", Split::validation},
      {"test", Split::test}, {"testing", Split::test}, {"eval", Split::test}, {"evaluation", Split::test},
  }};
  for (const auto& [name, split] : kWords) {
    if (word == name) return split;
  }
  return std::nullopt;
}

// The split the first keyword of `relative` (a path under the dataset's directory) names.
std::optional<Split> split_of(const std::string& relative) {
  std::string word;
  for (std::size_t i = 0; i <= relative.size(); ++i) {
    const char c = i < relative.size() ? relative[i] : '/';
    if (c == '-' || c == '_' || c == '.' || c == '/' || c == ' ' || (c >= '0' && c <= '9')) {
      if (const auto split = split_of_word(word)) return split;
      word.clear();
    } else {
      word += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
  }
  return std::nullopt;
}

std::vector<std::string> extensions_of(config::DatasetKind kind) {
  switch (kind) {
    case config::DatasetKind::parquet: return {".parquet"};
    case config::DatasetKind::arrow: return {".arrow"};
    default: return {".jsonl", ".jsonl.gz"};
  }
}

// A save_to_disk Dataset's Arrow files, in the order its state.json lists them.
std::vector<std::string> saved_files(const fs::path& dir) {
  const fs::path state = dir / "state.json";
  const JsonValue json = text::read_json_file(state.string(), "datasets' state.json");
  const JsonValue* files = json.find("_data_files");
  std::vector<std::string> paths;
  if (files != nullptr && files->kind == JsonValue::Kind::array) {
    for (const JsonValue& file : files->items) {
      const JsonValue* name = file.find("filename");
      if (name == nullptr || name->kind != JsonValue::Kind::string) {
        paths.clear();
        break;
      }
      paths.push_back((dir / name->string).string());
    }
  }
  if (paths.empty()) {
    throw RuntimeError(fmt::format("{}: no \"_data_files\" list of {{\"filename\": ...}}: not a state.json "
                                   "datasets' save_to_disk writes",
                                   state.string()));
  }
  return paths;
}

// The files of `dir` and its subdirectories (hidden ones skipped: .cache, .git) with one of
// `extensions`, as paths relative to `dir`, sorted.
std::vector<std::string> files_under(const fs::path& dir, const std::vector<std::string>& extensions) {
  std::vector<std::string> files;
  std::error_code error;
  for (auto it = fs::recursive_directory_iterator(dir, error); !error && it != fs::recursive_directory_iterator();
       it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.starts_with(".")) {
      if (it->is_directory(error)) it.disable_recursion_pending();
      continue;
    }
    std::error_code not_regular;  // a dangling link is skipped, not an error
    if (std::ranges::any_of(extensions, [&](const std::string& e) { return name.ends_with(e); }) &&
        it->is_regular_file(not_regular)) {
      files.push_back(fs::relative(it->path(), dir).generic_string());
    }
  }
  if (error) throw RuntimeError(fmt::format("{}: cannot list the directory: {}", dir.string(), error.message()));
  std::ranges::sort(files);
  return files;
}

DatasetFiles directory_files(const fs::path& dir, config::DatasetKind kind) {
  DatasetFiles out;
  std::error_code error;
  if (fs::exists(dir / "state.json", error)) {
    out.train = saved_files(dir);
    return out;
  }
  if (fs::exists(dir / "dataset_dict.json", error)) {
    const JsonValue dict = text::read_json_file((dir / "dataset_dict.json").string(), "datasets' dataset_dict.json");
    const JsonValue* splits = dict.find("splits");
    std::map<Split, std::string> named;
    if (splits != nullptr && splits->kind == JsonValue::Kind::array) {
      for (const JsonValue& split : splits->items) {
        if (split.kind != JsonValue::Kind::string) continue;
        if (const auto which = split_of(split.string); which && !named.contains(*which)) named[*which] = split.string;
      }
    }
    if (!named.contains(Split::train)) {
      throw RuntimeError(fmt::format("{}: its dataset_dict.json names no train split", (dir / "dataset_dict.json").string()));
    }
    out.train = saved_files(dir / named[Split::train]);
    for (const Split split : {Split::validation, Split::test}) {
      if (out.validation.empty() && named.contains(split)) {
        out.validation = saved_files(dir / named[split]);
        out.validation_split = named[split];
      }
    }
    return out;
  }
  const auto extensions = extensions_of(kind);
  const auto relative = files_under(dir, extensions);
  if (relative.empty()) {
    throw RuntimeError(fmt::format("{}: no *{} file in the directory or below it", dir.string(),
                                   fmt::join(extensions, " or *")));
  }
  // A Hub snapshot of several configs (gsm8k's main/ and socratic/) holds several datasets.
  std::vector<std::string> configs;
  for (const std::string& file : relative) {
    const auto slash = file.find('/');
    if (slash == std::string::npos) continue;
    const std::string top = file.substr(0, slash);
    if (top != "data" && !split_of(top) && std::ranges::find(configs, top) == configs.end()) configs.push_back(top);
  }
  if (configs.size() > 1) {
    throw RuntimeError(fmt::format("{}: holds the dataset configs {}: name one, such as {}", dir.string(),
                                   fmt::join(configs, ", "), (dir / configs.front()).string()));
  }
  std::map<Split, std::vector<std::string>> by_split;
  std::vector<std::string> unsplit;
  for (const std::string& file : relative) {
    const auto split = split_of(file);
    (split ? by_split[*split] : unsplit).push_back((dir / file).string());
  }
  if (by_split.empty()) {
    out.train = std::move(unsplit);
    return out;
  }
  // Files of no split beside split files belong to none: they are not read.
  if (!by_split.contains(Split::train)) {
    const bool validation = by_split.contains(Split::validation);
    throw RuntimeError(fmt::format("{}: its files are of the {} split{} and none of train: name a file to train "
                                   "on",
                                   dir.string(), validation ? "validation" : "test",
                                   validation && by_split.contains(Split::test) ? "s and test" : ""));
  }
  out.train = std::move(by_split[Split::train]);
  for (const auto& [split, name] : {std::pair{Split::validation, "validation"}, std::pair{Split::test, "test"}}) {
    if (out.validation.empty() && by_split.contains(split)) {
      out.validation = std::move(by_split[split]);
      out.validation_split = name;
    }
  }
  return out;
}

// A dataset's tables share one schema, else its records would change shape from file to file
// (and a record of another shape stops the run midway).
void require_one_schema(const DatasetFiles& files) {
  std::optional<std::pair<std::string, std::string>> first;  // file, schema
  for (const auto* split : {&files.train, &files.validation}) {
    for (const std::string& file : *split) {
      if (!tables::table_format(file)) continue;
      std::string schema = tables::table_schema(file);
      if (!first) {
        first.emplace(file, std::move(schema));
      } else if (schema != first->second) {
        throw RuntimeError(fmt::format("{}: its columns ({}) are not those of {} ({}): the files of a dataset "
                                       "share one schema",
                                       file, schema, first->first, first->second));
      }
    }
  }
}

}  // namespace

DatasetFiles dataset_files(const std::string& path, config::DatasetKind kind) {
  std::error_code error;
  DatasetFiles out;
  if (fs::is_directory(path, error)) {
    out = directory_files(path, kind);
  } else {
    out.train = expand(path);
  }
  require_one_schema(out);
  return out;
}

}  // namespace ampt::data
