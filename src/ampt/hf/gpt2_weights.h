// GPT-2's weights between Hugging Face's naming and layout and ampt's: HF keeps its Linear layers
// as Conv1D, weight [in, out]; ampt's are [out, in]. The head is the token embedding in both.
#pragma once

#include "ampt/core/named_tensors.h"
#include "ampt/hf/gpt2_config.h"
#include "ampt/hf/pretrained.h"

#include <string>
#include <vector>

namespace ampt::hf {

// The tensors of `files` (a model.safetensors or its shards, each index entry checked against its
// shard by read_model_tensors) as ampt's GPT parameters, float32 on the CPU: `transformer.` prefixes dropped (GPT2LMHeadModel saves them, GPT2Model does not),
// Conv1D weights transposed, the attention's mask buffers (attn.bias, attn.masked_bias) and a
// tied lm_head.weight skipped, wte padded with zero rows to `padded_vocab`. A missing tensor, a
// tensor of the wrong shape, an unknown one, or an lm_head that is not wte (an untied head,
// which ampt cannot represent) is one RuntimeError line naming the file and the tensor.
// The block Linears' tensors are those of `linears` (the family's inventory).
NamedTensors read_gpt2_weights(const ModelFiles& files, const Gpt2Config& config,
                               const DeclaredLinears& linears, int64_t padded_vocab);

// ampt's GPT parameters (`weights`, as read back from a checkpoint) as Hugging Face's tensors:
// transformer.* names, Conv1D layout, wte cut to config.vocab_size rows (the padding dropped).
// Throws RuntimeError naming a missing or misshapen parameter.
NamedTensors to_gpt2_tensors(const NamedTensors& weights, const Gpt2Config& config,
                             const DeclaredLinears& linears);

}  // namespace ampt::hf
