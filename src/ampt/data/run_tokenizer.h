// The tokenizer a run's text goes through, for training on text, generating and exporting: the
// one --tokenizer names, else the tokenizer files beside --init_from's weights, else none (bytes).
#pragma once

#include "ampt/config/config.h"
#include "ampt/text/tokenizer.h"
#include "ampt/text/vocabulary.h"

#include <optional>

namespace ampt::data {

// config.tokenizer, else init_from's directory (hf/pretrained.h: a path or a hub cache name),
// read by text::load_vocabulary; nullopt when neither is set. Throws RuntimeError naming the
// file that cannot be read, and for init_from's directory also how to name another.
std::optional<text::Vocabulary> run_vocabulary(const config::Config& config);

// run_vocabulary built into a Tokenizer, which checks it (a RuntimeError naming the file).
std::optional<text::Tokenizer> run_tokenizer(const config::Config& config);

}  // namespace ampt::data
