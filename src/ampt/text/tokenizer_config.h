// Hugging Face's tokenizer_config.json: which tokens begin and end a text. It sits beside
// tokenizer.json and decides what transformers' tokenizer(text) adds; ampt reads the same so a
// corpus is framed and generation stops as the model was trained.
#pragma once

#include "ampt/text/vocabulary.h"

#include <string>

namespace ampt::text {

// Sets vocabulary.eos from eos_token, and vocabulary.bos from bos_token where add_bos_token is
// true, to none where it is false, and leaves it (the tokenizer.json post_processor's) where it
// is absent. A token is a string or an object with "content"; null means none. Throws
// RuntimeError naming `path` for invalid JSON or a named token that is not in the vocabulary.
void read_tokenizer_config(const std::string& path, Vocabulary& vocabulary);

}  // namespace ampt::text
