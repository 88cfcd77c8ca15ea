#include "ampt/train/zero_optimizer.h"

#include <fmt/format.h>

namespace ampt::train {

int64_t ZeroOptimizer::bytes() const {
  int64_t total = 0;
  for (const auto& [name, tensor] : state) total += static_cast<int64_t>(tensor.nbytes());
  return total;
}

ZeroOptimizer make_zero_optimizer(const config::Config& config, distributed::ZeroShards& shards,
                                  const std::vector<std::string>& names,
                                  const std::vector<bool>& decay, const NamedTensors& whole) {
  ZeroOptimizer out;
  out.kinds = optimizer_state_kinds(config);
  const auto& pieces = shards.pieces();
  const auto options = shards.master_shard().options();
  OptimizerTensors tensors;
  tensors.state.resize(out.kinds.size());
  for (size_t k = 0; k < out.kinds.size(); ++k) {
    const auto numel = out.kinds[k].per_element ? shards.layout().shard_numel()
                                                : static_cast<int64_t>(pieces.size());
    out.state.emplace_back(out.kinds[k].name, torch::zeros({numel}, options));
  }
  for (size_t i = 0; i < pieces.size(); ++i) {
    const auto& piece = pieces[i];
    auto master = shards.master_pieces()[i];
    master.mutable_grad() = shards.grad_pieces()[i];
    tensors.names.push_back(fmt::format("{}[{}:{}]", names[piece.param], piece.begin,
                                        piece.begin + piece.count));
    tensors.params.push_back(master);
    tensors.decay.push_back(decay[piece.param]);
    for (size_t k = 0; k < out.kinds.size(); ++k) {
      const auto& flat = out.state[k].second;
      // A per-piece value is a 0-dim view of its flat tensor: the kernels count in place.
      tensors.state[k].push_back(out.kinds[k].per_element
                                     ? flat.narrow(0, piece.shard_offset, piece.count)
                                     : flat.select(0, static_cast<int64_t>(i)));
    }
  }
  auto beside = whole_parameters(config, whole);
  for (size_t i = 0; i < beside.params.size(); ++i) {
    tensors.names.push_back(beside.names[i]);
    tensors.params.push_back(beside.params[i]);
    tensors.decay.push_back(beside.decay[i]);
  }
  for (size_t k = 0; k < out.kinds.size(); ++k) {
    for (size_t i = 0; i < beside.params.size(); ++i) {
      tensors.state[k].push_back(beside.state[k][i]);
      out.whole_state.emplace_back(beside.names[i] + "." + out.kinds[k].name, beside.state[k][i]);
    }
  }
  out.optimizer = make_optimizer(config, std::move(tensors));
  return out;
}

}  // namespace ampt::train
