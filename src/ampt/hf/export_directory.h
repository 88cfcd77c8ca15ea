// The directory an export writes (a Hugging Face model, a peft adapter): built whole under a
// temporary name beside it and renamed into place (checkpoint/atomic_directory.h), so a failure
// leaves nothing and an earlier export is replaced whole, as an existing safetensors file is.
#pragma once

#include "ampt/checkpoint/atomic_directory.h"

#include <string>

namespace ampt::hf {

// Whether an export may replace `dir`: it does not exist, or it is an earlier export, a directory
// holding nothing but files an export writes (weights, config.json, adapter and tokenizer files,
// an AtomicFile's leftover temporaries). Anything else is a UsageError naming it, as replacing
// the directory would delete it.
void check_replaceable(const std::string& dir);

// An AtomicDirectory for `dir`, checked by check_replaceable.
class ExportDirectory : public checkpoint::AtomicDirectory {
 public:
  explicit ExportDirectory(const std::string& dir);
};

}  // namespace ampt::hf
