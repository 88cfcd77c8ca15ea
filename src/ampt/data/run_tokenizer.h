// The tokenizer a run's text goes through, for training on text and for generating: the one
// --tokenizer names, else the tokenizer files beside --init_from's weights, else none (bytes).
#pragma once

#include "ampt/config/config.h"
#include "ampt/text/tokenizer.h"

#include <optional>
#include <string>

namespace ampt::data {

// config.tokenizer, else init_from's directory (hf/pretrained.h: a path or a hub cache name)
// read by text::load_tokenizer; nullopt when neither is set. Throws RuntimeError naming the file
// that cannot be read, and for init_from's directory also how to name another.
std::optional<text::Tokenizer> run_tokenizer(const config::Config& config);

// Where run_tokenizer reads from: config.tokenizer, else init_from's directory; nullopt for none.
std::optional<std::string> run_tokenizer_path(const config::Config& config);

}  // namespace ampt::data
