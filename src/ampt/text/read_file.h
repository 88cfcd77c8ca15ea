// A text file whole, and its lines, for the tokenizer's files and the texts it encodes.
#pragma once

#include "ampt/core/json_reader.h"

#include <cstddef>
#include <string>
#include <string_view>

namespace ampt::text {

// The file's bytes (core/whole_file.h); throws RuntimeError "PATH: cannot open: REASON" or
// "PATH: file is empty".
std::string read_text_file(const std::string& path);

// The one JSON value in the file; throws read_text_file's errors, and RuntimeError "PATH: invalid
// JSON (WHAT): ..." where `what` says what the file is ("a Hugging Face tokenizer.json").
JsonValue read_json_file(const std::string& path, std::string_view what);

// Calls fn(line, number) for each line of `text` (numbered from 1), without its "\n" or "\r\n".
template <typename Fn>
void for_each_line(std::string_view text, Fn&& fn) {
  std::size_t number = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    fn(line, ++number);
    pos = end + 1;
  }
}

}  // namespace ampt::text
