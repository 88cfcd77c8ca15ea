// The files of record data (jsonl:, parquet:, arrow:) as users have them on disk: one file, a glob,
// or a directory: `datasets`' save_to_disk (state.json naming its Arrow files; dataset_dict.json
// its splits, one directory each), a Hugging Face Hub snapshot (data/train-00000-of-00002.parquet,
// or refs/convert/parquet's default/train/0000.parquet), or a directory of such files. A file's
// split comes from its path as `datasets` reads it: a word of it, between separators (- _ . /,
// digits), that names one (train, training; validation, valid, val, dev; test, testing, eval).
#pragma once

#include "ampt/config/dataset_spec.h"

#include <string>
#include <vector>

namespace ampt::data {

struct DatasetFiles {
  std::vector<std::string> train;
  // The data's own validation split: its validation files, else its test files; empty where the
  // data has no split of either (validation is then held out of train: val_fraction).
  std::vector<std::string> validation;
  std::string validation_split;  // "validation" or "test", the split those files are
};

// Throws RuntimeError naming the path: nothing to read, a directory of several dataset configs
// (gsm8k's main/ and socratic/), splits without a train split, or an unreadable state.json.
DatasetFiles dataset_files(const std::string& path, config::DatasetKind kind);

}  // namespace ampt::data
