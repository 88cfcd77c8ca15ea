// A dataset as the loader and the models see it: what one sample looks like, and random access.
#pragma once

#include "ampt/data/batch.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ampt::data {

enum class Task { classification, language_model };

// What a model needs to know about its data.
struct DataSpec {
  Task task = Task::classification;
  std::vector<int64_t> sample_shape;  // one input: {features}, {channels, height, width}, {block_size}
  int64_t classes = 0;                // classes, or the vocabulary size of a language model
  // False where targets may be kIgnoredTarget (document_examples.h: padding, unscored prompts),
  // so that micro-batches score different numbers of targets.
  bool every_target_scored = true;
  // Samples are preference pairs (preference_pairs.h): a batch of n is 2n rows, the n chosen
  // sequences and then their n rejected ones.
  bool preference = false;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // The samples at `indices`, stacked into a CPU batch: inputs [n, sample_shape...] (float32
  // features or images, int64 tokens) and targets [n] (int64 classes) or [n, block_size] (int64
  // next tokens). Safe to call from several threads at once.
  virtual Batch gather(const std::vector<int64_t>& indices) const = 0;
};

}  // namespace ampt::data
