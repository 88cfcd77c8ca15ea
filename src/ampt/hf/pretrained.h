// A pretrained Hugging Face model's files (hub_cache.h finds its directory): config.json and
// safetensors weights, one file or shards listed by an index.
#pragma once

#include "ampt/config/config.h"
#include "ampt/core/named_tensors.h"

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ampt::hf {

// The model files in a pretrained directory.
struct ModelFiles {
  std::string dir;
  std::string config_json;           // dir/config.json
  std::vector<std::string> weights;  // model.safetensors, or the shards its index lists
  std::string index;                 // the index, when sharded
  std::map<std::string, std::string> shard_of;  // the index's tensor name -> shard path
};

// Gives `visit` each tensor of `files.weights` with its name in the files and the file it came
// from, as it is read (checkpoint::for_each_safetensor): what `visit` does not keep is let go
// before the next is read. A tensor the index names that its shard lacks is one RuntimeError
// line naming the index, the shard and the tensor, once that shard has been read.
using FileTensorVisitor = std::function<void(const std::string& name, const torch::Tensor& tensor,
                                             const std::string& file)>;
void for_each_model_tensor(const ModelFiles& files, const FileTensorVisitor& visit);

// Every tensor of `files.weights` at once (for_each_model_tensor), by its name in the files,
// with the file it came from.
std::map<std::string, std::pair<torch::Tensor, std::string>> read_model_tensors(const ModelFiles& files);

// Where a model's tensors go as they are read, in the model's own parameter names; a tensor is in
// its file's dtype.
using TensorSink = std::function<void(const std::string& name, const torch::Tensor& tensor)>;

// A block's Linear layer as its family declares it once, in its layer inventory
// (models/layer_inventory.h): the files hold its weight (and bias) under the same module name,
// so the readers and writers take the block Linears' names and shapes from here rather than
// spelling them again.
struct DeclaredLinear {
  std::string name;  // ampt's module name: "layers.3.self_attn.q_proj"
  int64_t in = 0;
  int64_t out = 0;
  bool bias = false;
  // A sparse block's router (its weight "<name>.weight"), or one of its expert groups' weight
  // stacks (the tensor "<name>"), which the files hold apart from the Linears.
  enum class Kind { linear, router, experts_up, experts_down } kind = Kind::linear;
};
using DeclaredLinears = std::vector<DeclaredLinear>;

// Checks that `dir` holds config.json and safetensors weights (a single file or a sharded index).
// A directory with only pytorch_model.bin (a pickle) is refused with the command that converts
// it; anything missing is one RuntimeError line naming the file.
ModelFiles model_files(const std::string& dir);

// pretrained_dir(config.init_from, config.hf_hub_cache), then model_files of it.
ModelFiles pretrained_files(const config::Config& config);

// `dir`/config.json's model_type, which names the model's class in transformers ("gpt2",
// "llama"); empty when the file has none. RuntimeError naming the file when it is missing or not
// JSON.
std::string model_type(const std::string& dir);

}  // namespace ampt::hf
