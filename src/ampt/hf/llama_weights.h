// Llama and Qwen2 weights between Hugging Face's names and ampt's: the same tensors and layouts,
// "model." dropped from all but lm_head.
#pragma once

#include "ampt/core/named_tensors.h"
#include "ampt/hf/llama_config.h"
#include "ampt/hf/pretrained.h"

namespace ampt::hf {

// The block Linears' tensors are those of `linears` (the family's inventory), the others the
// family's own.
//
// Gives `sink` the tensors of `files` as ampt's Llama parameters, on the CPU in the files' dtypes
// (fp32, bf16 or fp16), one at a time as they are read (for_each_model_tensor). A tied model's
// lm_head.weight, when saved, must equal embed_tokens; rotary inv_freq buffers of older
// checkpoints are skipped. A missing tensor, one of the wrong shape or not floating point, or an
// unknown one is one RuntimeError line naming the file and the tensor.
void read_llama_weights(const ModelFiles& files, const LlamaArchitecture& config,
                        const DeclaredLinears& linears, const TensorSink& sink);
// All of them at once, float32.
NamedTensors read_llama_weights(const ModelFiles& files, const LlamaArchitecture& config,
                                const DeclaredLinears& linears);

// ampt's Llama parameters (from a checkpoint) as Hugging Face's tensors, in their order.
// Throws RuntimeError naming a missing or misshapen parameter.
NamedTensors to_llama_tensors(const NamedTensors& weights, const LlamaArchitecture& config,
                              const DeclaredLinears& linears);

}  // namespace ampt::hf
