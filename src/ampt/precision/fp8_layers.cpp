#include "ampt/precision/fp8_layers.h"

#include "ampt/config/precision_schedule.h"
#include "ampt/core/errors.h"
#include "ampt/core/glob.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <iterator>
#include <string_view>

namespace ampt::precision {
namespace {

// 0,1,2,3,5,7,8 → "0-3,5,7-8"
std::string ranges_of(const std::vector<int64_t>& sorted) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    parts.push_back(j == i ? std::to_string(sorted[i])
                           : fmt::format("{}-{}", sorted[i], sorted[j]));
    i = j + 1;
  }
  return fmt::format("{}", fmt::join(parts, ","));
}

// Layers of one kind with one choice, in the order they first appear; `key` names them.
struct Group {
  std::string kind;
  bool fp8;
  std::vector<int64_t> blocks;
  const Fp8LayerChoice* first;
  std::string name() const {
    if (blocks.empty()) return kind;
    const auto star = kind.find('*');
    return kind.substr(0, star) + ranges_of(blocks) + kind.substr(star + 1);
  }
};

std::vector<Group> groups_of(const std::vector<Fp8LayerChoice>& layers) {
  std::vector<Group> groups;
  for (const auto& layer : layers) {
    const auto& kind = layer.block >= 0 ? layer.kind : layer.name;
    const auto block = layer.block;
    auto it = std::ranges::find_if(groups, [&](const Group& g) {
      return g.kind == kind && g.fp8 == layer.fp8 && block >= 0;
    });
    if (it == groups.end()) {
      groups.push_back({kind, layer.fp8, {}, &layer});
      it = std::prev(groups.end());
    }
    if (block >= 0) it->blocks.push_back(block);
  }
  return groups;
}

std::string milliseconds(const std::optional<GemmTimes>& t, double GemmTimes::*field) {
  return t ? fmt::format("{:.3f}", (*t).*field) : "–";
}

// Paired layers run as one operation only in one precision (a GPT block's MLP, whose
// elementwise work rides in its GEMMs' epilogues or its fp8 casts): where auto's choices for the
// two differ, both take the one whose GEMMs measured faster in sum.
void pair_layers(std::vector<Fp8LayerChoice>& layers) {
  for (auto& first : layers) {
    if (first.paired.empty()) continue;
    const auto second = std::ranges::find(layers, first.paired, &Fp8LayerChoice::name);
    if (second == layers.end() || second->fp8 == first.fp8 || !first.times || !second->times) {
      continue;
    }
    first.fp8 = second->fp8 = first.times->fp8_ms + second->times->fp8_ms <
                              first.times->bf16_ms + second->times->bf16_ms;
  }
}

}  // namespace

GemmTimes Fp8TimingCache::get(const std::string& device, const GemmShape& shape,
                              const GemmTimer& measure) {
  const auto key = std::make_tuple(device, shape);
  const auto found = times_.find(key);
  if (found != times_.end()) return found->second;
  return times_[key] = measure(shape);
}

bool Fp8LayerPlan::fp8(const std::string& name) const {
  const auto it = std::ranges::find(layers, name, &Fp8LayerChoice::name);
  return it != layers.end() && it->fp8;
}

std::vector<std::string> Fp8LayerPlan::table() const {
  const auto in_fp8 = std::ranges::count(layers, true, &Fp8LayerChoice::fp8);
  std::vector<std::string> lines = {
      fmt::format("fp8 layers (--fp8_layers {}{}): {} of {} in fp8", setting,
                  setting == "auto" ? ", fp8 where its GEMMs measured faster, a block's MLP "
                                      "Linears together"
                                    : "",
                  in_fp8, layers.size()),
      "| layers | GEMM (rows x in -> out) | bf16 ms | fp8 ms | fp8 gain | runs in |",
      "|---|---|---:|---:|---:|---|"};
  for (const auto& g : groups_of(layers)) {
    const auto& l = *g.first;
    lines.push_back(fmt::format("| {} | {} x {} -> {} | {} | {} | {} | {} |", g.name(),
                                l.shape.rows, l.shape.in, l.shape.out,
                                milliseconds(l.times, &GemmTimes::bf16_ms),
                                milliseconds(l.times, &GemmTimes::fp8_ms),
                                l.times ? fmt::format("{:.2f}x", l.times->gain()) : "–",
                                g.fp8 ? "fp8" : "bf16"));
  }
  return lines;
}

Fp8LayerPlan choose_fp8_layers(const std::string& setting,
                               const std::vector<Fp8Candidate>& candidates, int64_t rows,
                               const std::string& device, const GemmTimer& measure,
                               Fp8TimingCache& cache) {
  Fp8LayerPlan plan{setting, {}};
  const auto patterns = config::split_module_patterns(setting);
  for (const auto& c : candidates) {
    Fp8LayerChoice choice{c.name, c.paired, c.block, c.kind, {rows, c.in, c.out}, true,
                          std::nullopt};
    if (setting == "auto") {
      choice.times = cache.get(device, choice.shape, measure);
      choice.fp8 = choice.times->fp8_ms < choice.times->bf16_ms;
    } else if (setting != "all") {
      choice.fp8 = std::ranges::any_of(patterns, [&](const auto& p) { return glob_match(p, c.name); });
    }
    plan.layers.push_back(std::move(choice));
  }
  if (setting == "auto") pair_layers(plan.layers);
  if (setting == "auto" || setting == "all") return plan;
  for (const auto& p : patterns) {
    if (std::ranges::none_of(candidates, [&](const auto& c) { return glob_match(p, c.name); })) {
      std::vector<std::string> names;
      for (auto& l : plan.layers) l.fp8 = true;  // name the candidates by kind
      for (const auto& g : groups_of(plan.layers)) names.push_back(g.name());
      throw UsageError(fmt::format("fp8_layers pattern '{}' matches no layer that can run in "
                                   "fp8; those are {}",
                                   p, fmt::join(names, ", ")));
    }
  }
  return plan;
}

}  // namespace ampt::precision
