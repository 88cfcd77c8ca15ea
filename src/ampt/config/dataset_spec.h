// The syntax of --dataset ("synthetic", "tokens:PATH", ...): parsed once here, so the option
// validator and the data registry agree on what a valid spec is.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ampt::config {

enum class DatasetKind { synthetic, text, jsonl, tokens, mnist, fashion_mnist, cifar10 };

struct DatasetSpec {
  DatasetKind kind = DatasetKind::synthetic;
  std::string path;  // empty for synthetic; a file, directory or glob otherwise
};

// "synthetic", or "KIND:PATH" with a non-empty PATH; nullopt for anything else.
std::optional<DatasetSpec> parse_dataset_spec(std::string_view text);

// Data only a language model can take: text, JSON Lines documents, token files.
bool is_language_model_data(DatasetKind kind);

// What error messages and --help quote as the valid forms.
inline constexpr std::string_view kDatasetSpecExpected =
    "synthetic, text:PATH, jsonl:PATH, tokens:PATH_OR_GLOB, mnist:DIR, fashion-mnist:DIR or "
    "cifar10:DIR";

}  // namespace ampt::config
