#include "ampt/config/dataset_spec.h"

#include <array>
#include <utility>

namespace ampt::config {

std::optional<DatasetSpec> parse_dataset_spec(std::string_view text) {
  if (text == "synthetic") return DatasetSpec{};
  static constexpr std::array<std::pair<std::string_view, DatasetKind>, 8> kWithPath{{
      {"text", DatasetKind::text},
      {"jsonl", DatasetKind::jsonl},
      {"parquet", DatasetKind::parquet},
      {"arrow", DatasetKind::arrow},
      {"tokens", DatasetKind::tokens},
      {"mnist", DatasetKind::mnist},
      {"fashion-mnist", DatasetKind::fashion_mnist},
      {"cifar10", DatasetKind::cifar10},
  }};
  const auto colon = text.find(':');
  if (colon == std::string_view::npos || colon + 1 == text.size()) return std::nullopt;
  for (const auto& [prefix, kind] : kWithPath) {
    if (text.substr(0, colon) == prefix) return DatasetSpec{kind, std::string(text.substr(colon + 1))};
  }
  return std::nullopt;
}

bool is_language_model_data(DatasetKind kind) {
  return kind == DatasetKind::text || is_record_data(kind) || kind == DatasetKind::tokens;
}

bool is_record_data(DatasetKind kind) {
  return kind == DatasetKind::jsonl || kind == DatasetKind::parquet || kind == DatasetKind::arrow;
}

}  // namespace ampt::config
