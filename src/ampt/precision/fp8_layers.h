// Which of a model's Linear layers run in fp8 (--fp8_layers): all of them, those whose names
// match patterns, or (auto) those whose GEMMs measured faster in fp8 than in bf16 on this device.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace ampt::precision {

// A Linear layer that can run in fp8: x [rows, in] · Wᵀ → [rows, out].
struct Fp8Candidate {
  std::string name;  // e.g. "h.3.mlp.c_fc", "head"
  int64_t in = 0;
  int64_t out = 0;
  // A layer that runs as one operation with this one only in one precision (a GPT block's
  // mlp.c_fc pairs with its mlp.c_proj): auto gives the two one choice. Empty: none.
  std::string paired;
  // Its block (the layer inventory's index; -1: outside the blocks) and its kind, the name with
  // the block's number as "*" ("h.*.mlp.c_fc"): the table groups a kind's blocks in one row.
  int64_t block = -1;
  std::string kind;
};

// The three GEMMs of a layer at one micro-batch: forward, and the input and weight gradients.
struct GemmShape {
  int64_t rows = 0, in = 0, out = 0;
  auto operator<=>(const GemmShape&) const = default;
};

// Milliseconds per forward + backward of one layer's GEMMs in each precision (fp8: quantisation
// included).
struct GemmTimes {
  double bf16_ms = 0.0;
  double fp8_ms = 0.0;
  double gain() const { return bf16_ms / fp8_ms; }  // > 1: fp8 is faster
};

using GemmTimer = std::function<GemmTimes(const GemmShape&)>;

// Whether the layer of this name runs in fp8 (a plan's choice, handed to the model).
using Fp8Selected = std::function<bool(const std::string& layer)>;

// Measurements by device (a name that says which GPU and recipe) and shape: layers of one shape
// are measured once, and a device measured again reuses its times.
class Fp8TimingCache {
 public:
  GemmTimes get(const std::string& device, const GemmShape& shape, const GemmTimer& measure);
  std::size_t size() const { return times_.size(); }

 private:
  std::map<std::tuple<std::string, GemmShape>, GemmTimes> times_;
};

struct Fp8LayerChoice {
  std::string name;
  std::string paired;  // Fp8Candidate::paired
  int64_t block = -1;  // Fp8Candidate::block and kind
  std::string kind;
  GemmShape shape;
  bool fp8 = false;
  std::optional<GemmTimes> times;  // auto only
};

struct Fp8LayerPlan {
  std::string setting;  // "auto", "all" or the patterns
  std::vector<Fp8LayerChoice> layers;

  bool fp8(const std::string& name) const;
  // A Markdown table, one row per run of blocks whose same layer got the same choice:
  // | layers | GEMM (rows x in -> out) | bf16 ms | fp8 ms | fp8 gain | runs in |
  std::vector<std::string> table() const;
};

// The plan for `setting` (config.fp8_layers: "auto", "all" or comma-separated name patterns)
// over `candidates` at `rows` rows per micro-batch. auto measures each shape once through `cache`
// (`measure` runs only for shapes it lacks) and picks fp8 where it was faster, except that
// paired layers (Fp8Candidate::paired) take one choice, the faster in sum. Throws UsageError when a pattern matches no candidate.
Fp8LayerPlan choose_fp8_layers(const std::string& setting,
                               const std::vector<Fp8Candidate>& candidates, int64_t rows,
                               const std::string& device, const GemmTimer& measure,
                               Fp8TimingCache& cache);

}  // namespace ampt::precision
