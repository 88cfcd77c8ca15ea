#include "ampt/data/text_file.h"

#include "ampt/core/mapped_file.h"

#include <memory>

namespace ampt::data {

TokenSpan open_text_file(const std::string& path) {
  auto file = std::make_shared<const MappedFile>(path);
  TokenSpan span;
  span.name = path;
  span.data = file->data();
  span.count = static_cast<int64_t>(file->size());
  span.bytes_per_token = 1;
  span.owner = std::move(file);
  return span;
}

}  // namespace ampt::data
