// A GPT's fp8 candidates (its inventory's Linear layers and the head) and the per-layer
// selection attached by name: exactly the selected layers change what the model computes.
#include "ampt/models/gpt.h"
#include "ampt/models/linear.h"

#include "ampt/precision/autocast_guard.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

using ampt::models::fp8_candidates;
using ampt::models::Gpt;
using ampt::models::GptDims;
using ampt::models::layer_inventory;

namespace {

GptDims tiny() { return {2, 64, 4, 32, 256, 0.0}; }

}  // namespace

TEST_CASE("gpt fp8 candidates: four Linear layers per block, then the head", "[models][gpt][fp8]") {
  const auto c = fp8_candidates(layer_inventory(tiny()), /*fused_head=*/true);
  REQUIRE(c.size() == 9);
  const std::vector<std::tuple<std::string, int64_t, int64_t>> expected = {
      {"h.0.attn.c_attn", 64, 192}, {"h.0.attn.c_proj", 64, 64}, {"h.0.mlp.c_fc", 64, 256},
      {"h.0.mlp.c_proj", 256, 64},  {"h.1.attn.c_attn", 64, 192}, {"h.1.attn.c_proj", 64, 64},
      {"h.1.mlp.c_fc", 64, 256},    {"h.1.mlp.c_proj", 256, 64}, {"head", 64, 256}};
  for (size_t i = 0; i < c.size(); ++i) {
    CHECK(std::tuple{c[i].name, c[i].in, c[i].out} == expected[i]);
  }
  // Each MLP's two Linears take one choice (one fused operation in one precision).
  CHECK(c[2].paired == "h.0.mlp.c_proj");
  CHECK(c[6].paired == "h.1.mlp.c_proj");
  // The fp8 table's rows group a kind's blocks: the kind and block come from the inventory.
  CHECK(std::tuple{c[6].kind, c[6].block} == std::tuple{std::string("h.*.mlp.c_fc"), int64_t{1}});
  CHECK(std::tuple{c[8].kind, c[8].block} == std::tuple{std::string(), int64_t{-1}});
  CHECK(c[0].paired.empty());
  CHECK(c[3].paired.empty());
  // The head runs in fp8 only inside the fused loss, and only with whole 16-row tiles.
  CHECK(fp8_candidates(layer_inventory(tiny()), /*fused_head=*/false).size() == 8);
  auto odd = tiny();
  odd.vocab_size = 250;
  CHECK(fp8_candidates(layer_inventory(odd), /*fused_head=*/true).size() == 8);
}

TEST_CASE("gpt fp8 selection: only the selected layers run in fp8", "[models][gpt][fp8]") {
  const auto tokens = torch::randint(0, 256, {4, 33}, torch::kInt64);
  const auto inputs = tokens.narrow(1, 0, 32), targets = tokens.narrow(1, 1, 32);
  // Same weights each time; the forward's logits and the fused loss under bf16 autocast.
  const auto run = [&](const std::function<bool(const std::string&)>& selected) {
    torch::manual_seed(8);
    Gpt gpt(tiny());
    if (selected) {
      ampt::models::attach_fp8(*gpt, ampt::precision::Fp8Recipe{}, selected);
      gpt->set_fp8_head(selected("head"));
    }
    ampt::precision::AutocastGuard autocast(c10::kCPU, c10::kBFloat16, true);
    return std::pair{gpt->forward(inputs), gpt->loss(inputs, targets)};
  };
  const auto plain = run({});
  const auto none = run([](const std::string&) { return false; });
  CHECK(torch::equal(none.first, plain.first));
  CHECK(torch::equal(none.second, plain.second));

  const auto one = run([](const std::string& n) { return n == "h.1.mlp.c_proj"; });
  CHECK_FALSE(torch::equal(one.first, plain.first));
  CHECK(torch::allclose(one.first, plain.first, 0.1, 0.1));  // fp8 is close, not equal

  // The head: the loss changes, the logits (generation's path) do not.
  const auto head = run([](const std::string& n) { return n == "head"; });
  CHECK(torch::equal(head.first, plain.first));
  CHECK_FALSE(torch::equal(head.second, plain.second));
  CHECK(std::abs(head.second.item<double>() - plain.second.item<double>()) <
        0.02 * plain.second.item<double>());
}
