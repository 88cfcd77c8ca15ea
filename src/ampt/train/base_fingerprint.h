// A LoRA run's checkpoints hold only the adapters: the frozen base they were trained on is named
// by a fingerprint of its values, so that a resume onto another base is refused.
#pragma once

#include "ampt/checkpoint/checkpoint.h"
#include "ampt/core/named_tensors.h"

#include <string>

namespace ampt::train {

// 16 hex digits over the tensors' names, shapes and values as fp32 in name order (the base's own values,
// before it is held in a half dtype, so any precision resumes from any other), hashed on the
// host one tensor at a time. Not a defence against crafted collisions.
std::string base_fingerprint(const NamedTensors& frozen);

// Whether the checkpoint at `path` fits a model whose base is init_from's with `fingerprint`
// (empty: no LoRA): RuntimeError, one line, for LoRA adapters of another base, adapters for a
// run without LoRA, or a full model for a LoRA run.
void require_same_base(const std::string& path, const checkpoint::Checkpoint& saved,
                       const std::string& init_from, const std::string& fingerprint);

}  // namespace ampt::train
