// A GPT block's attention as one autograd node: the composite's values and gradients bit for bit
// (fp32, bf16 under autocast, with the weights' half copies), with one node where the composite
// has sixteen.
#include "ampt/models/gpt_presets.h"
#include "ampt/kernels/fused_attention.h"
#include "ampt/kernels/weight_copies.h"
#include "ampt/models/attention.h"
#include "ampt/precision/autocast_guard.h"

#include "support/autograd_graph.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

namespace {

struct Pass {
  torch::Tensor y, dx;
  std::vector<torch::Tensor> grads;
  int64_t nodes = 0;
};

Pass run_attention(ampt::models::CausalSelfAttention& attention, bool fused, c10::ScalarType dtype) {
  attention->set_fused(fused, fused);
  attention->zero_grad();
  torch::manual_seed(8);
  const auto x = torch::randn({2, 24, 64}).requires_grad_(true);
  const auto g = torch::randn({2, 24, 64});
  torch::Tensor y;
  {
    ampt::precision::AutocastGuard autocast(torch::kCPU, dtype, dtype != torch::kFloat32);
    y = attention->forward(x);
  }
  Pass pass;
  pass.nodes = ampt::test::nodes_named(y, "");  // every node
  (y.to(torch::kFloat32) * g).sum().backward();
  pass.y = y.detach();
  pass.dx = x.grad();
  for (const auto& p : attention->parameters()) pass.grads.push_back(p.grad().clone());
  return pass;
}

}  // namespace

TEST_CASE("fused attention: one node with the composite's values and gradients, bit for bit",
          "[kernels][fused_attention]") {
  torch::manual_seed(7);
  ampt::models::GptDims dims;  // one block of width 64: its Linears as GPT-2 declares them
  dims.n_layer = 1;
  dims.n_embd = 64;
  ampt::models::CausalSelfAttention attention(4, 0.0, ampt::models::layer_inventory(dims).block_linears());
  for (const auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    for (const bool copies : {false, true}) {
      if (copies && dtype == torch::kFloat32) continue;
      INFO(dtype << (copies ? ", half copies" : ""));
      for (const auto& p : attention->parameters()) {
        if (copies) ampt::kernels::allow_weight_copy(p, dtype, /*fp32_grad=*/true);
      }
      const auto composite = run_attention(attention, false, dtype);
      const auto fused = run_attention(attention, true, dtype);
      CHECK(torch::equal(fused.y, composite.y));
      CHECK(torch::equal(fused.dx, composite.dx));
      REQUIRE(fused.grads.size() == composite.grads.size());
      for (size_t i = 0; i < fused.grads.size(); ++i) {
        INFO("parameter " << i);
        CHECK(torch::equal(fused.grads[i], composite.grads[i]));
      }
      CHECK(fused.nodes + 10 < composite.nodes);
      for (const auto& p : attention->parameters()) ampt::kernels::forbid_weight_copy(p);
    }
  }
}
