// The syntax of --dataset ("synthetic", "tokens:PATH", ...): parsed once here, so the option
// validator and the data registry agree on what a valid spec is.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ampt::config {

// jsonl:, parquet: and arrow: all name record data, read by the files' own first bytes
// (text/record_files.h): they differ in which files a directory gives (dataset_files.h).
enum class DatasetKind { synthetic, text, jsonl, parquet, arrow, tokens, mnist, fashion_mnist, cifar10 };

struct DatasetSpec {
  DatasetKind kind = DatasetKind::synthetic;
  std::string path;  // empty for synthetic; a file, directory or glob otherwise
};

// "synthetic", or "KIND:PATH" with a non-empty PATH; nullopt for anything else.
std::optional<DatasetSpec> parse_dataset_spec(std::string_view text);

// Data only a language model can take: text, records (JSON Lines, Parquet, Arrow), token files.
bool is_language_model_data(DatasetKind kind);
// Records: jsonl:, parquet: or arrow: data.
bool is_record_data(DatasetKind kind);

// What error messages and --help quote as the valid forms.
inline constexpr std::string_view kDatasetSpecExpected =
    "synthetic, text:PATH, jsonl:PATH, parquet:PATH, arrow:PATH, tokens:PATH_OR_GLOB, mnist:DIR, "
    "fashion-mnist:DIR or cifar10:DIR";

}  // namespace ampt::config
