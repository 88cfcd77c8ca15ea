// A LoRA run's checkpoints hold only the adapters: the frozen base they were trained on is named
// by a fingerprint of its values, so that a resume onto another base is refused.
#pragma once

#include "ampt/checkpoint/checkpoint.h"
#include "ampt/config/config.h"
#include "ampt/core/named_tensors.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ampt::train {

// One tensor's part of base_fingerprint, taken where its values are at hand: a base that is
// quantized, or held in a half dtype, as it loads keeps no values to hash later.
struct TensorDigest {
  std::vector<int64_t> sizes;
  uint64_t values = 0;
};
TensorDigest tensor_digest(const torch::Tensor& tensor);

// 16 hex digits over the tensors' names, shapes and values as fp32 in name order (the base's own values,
// before it is held in a half dtype, so any precision resumes from any other), hashed on the
// host one tensor at a time. Not a defence against crafted collisions. `digested`: the digests
// of frozen tensors taken as they loaded, by name; they stand for those tensors of `frozen`.
std::string base_fingerprint(const NamedTensors& frozen,
                             const std::map<std::string, TensorDigest>& digested = {});

// Whether the checkpoint at `path` fits a model whose base is init_from's with `fingerprint`
// (empty: no LoRA), stored as `base_dtype`: RuntimeError, one line, for LoRA adapters of another
// base or trained over another storage of it (an nf4 base's adapters learnt its rounding), adapters
// for a run without LoRA, or a full model for a LoRA run.
void require_same_base(const std::string& path, const checkpoint::Checkpoint& saved,
                       const std::string& init_from, const std::string& fingerprint,
                       config::BaseDtype base_dtype);

}  // namespace ampt::train
