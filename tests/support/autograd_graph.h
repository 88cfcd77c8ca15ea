// What a tensor's autograd graph holds, for tests that check which operation ran.
#pragma once

#include <torch/torch.h>

#include <set>
#include <string>
#include <vector>

namespace ampt::test {

// The nodes of the graph that made `t` (back to its leaves, each node once) whose names contain
// `part`, e.g. an autograd Function's class name.
inline int64_t nodes_named(const torch::Tensor& t, const std::string& part) {
  std::set<const torch::autograd::Node*> seen;
  std::vector<std::shared_ptr<torch::autograd::Node>> pending{t.grad_fn()};
  int64_t count = 0;
  while (!pending.empty()) {
    const auto node = pending.back();
    pending.pop_back();
    if (!node || !seen.insert(node.get()).second) continue;
    if (node->name().find(part) != std::string::npos) ++count;
    for (const auto& edge : node->next_edges()) pending.push_back(edge.function);
  }
  return count;
}

}  // namespace ampt::test
