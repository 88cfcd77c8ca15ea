#include "ampt/plan/memory_plan.h"

#include "ampt/precision/choice.h"

#include <fmt/format.h>

#include <cmath>
#include <utility>

namespace ampt::plan {
namespace {

using config::OptLevel;

struct Candidate {
  Scheme scheme;
  bool checkpointing;
};

// One rank's estimate.
MemoryEstimate estimate(const ModelDims& dims, const Scheme& scheme, config::OptimizerKind optimizer,
                        double momentum, int64_t micro_batch, const Sharding& sharding) {
  return shard_memory(estimate_memory(dims, scheme, optimizer, momentum, micro_batch), dims,
                      scheme, sharding);
}

int64_t total_of(const ModelDims& dims, const Candidate& c, config::OptimizerKind optimizer,
                 double momentum, int64_t micro_batch, const Sharding& sharding) {
  const auto m = estimate(dims, c.scheme, optimizer, momentum, micro_batch, sharding);
  return c.checkpointing ? m.total_checkpointed() : m.total();
}

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d <= n; ++d) {
    if (n % d == 0) out.push_back(d);
  }
  return out;
}

// The largest divisor of global_batch that fits, 0 when not even 1 does.
int64_t largest_fitting(const ModelDims& dims, const Candidate& c, config::OptimizerKind optimizer,
                        double momentum, int64_t global_batch, int64_t budget,
                        const Sharding& sharding) {
  int64_t best = 0;
  for (const int64_t b : divisors(global_batch)) {
    if (total_of(dims, c, optimizer, momentum, b, sharding) > budget) break;  // grows with b
    best = b;
  }
  return best;
}

int capability_of(const GpuTarget& gpu) {
  return static_cast<int>(std::lround(gpu.compute_capability * 10.0));
}

// The precision `--mixed_precision auto` (the default) picks on this GPU: bf16 or fp16.
Precision auto_precision(const GpuTarget& gpu) {
  return precision::auto_gpu_precision(capability_of(gpu)).precision == config::MixedPrecision::bf16
             ? Precision::bf16
             : Precision::fp16;
}

}  // namespace

int64_t usable_bytes(const GpuTarget& gpu) {
  return static_cast<int64_t>(gpu.memory_gb * (1.0 - kFragmentation) * static_cast<double>(1 << 30)) -
         kContextBytes;
}

Recommendation recommend(const ModelDims& dims, config::OptimizerKind optimizer, double momentum,
                         int64_t global_batch, const GpuTarget& gpu, const Sharding& sharding) {
  const int64_t budget = usable_bytes(gpu);
  const Precision precision = auto_precision(gpu);
  const bool can_checkpoint = dims.transformer();
  std::vector<Candidate> candidates;
  for (const auto level : {OptLevel::O1, OptLevel::O2}) {
    if (!scheme_runs({precision, level}, dims, sharding)) continue;
    candidates.push_back({{precision, level}, false});
    if (can_checkpoint) candidates.push_back({{precision, level}, true});
  }
  const int64_t wanted = std::min<int64_t>(8, global_batch);

  Recommendation r;
  std::optional<Candidate> chosen;
  int64_t chosen_batch = 0;
  for (const auto& c : candidates) {
    const int64_t b = largest_fitting(dims, c, optimizer, momentum, global_batch, budget, sharding);
    if (b >= wanted) {  // the first in order that fits the wanted micro-batch
      chosen = c;
      chosen_batch = b;
      break;
    }
    if (b > chosen_batch) {
      chosen = c;
      chosen_batch = b;
    }
  }
  const auto base = estimate(dims, candidates.front().scheme, optimizer, momentum, 1, sharding);
  if (!chosen) {
    r.reasons.push_back(fmt::format(
        "Nothing fits: even a micro-batch of 1 needs more than the {:.1f} GiB usable under every "
        "precision and opt level; the weights, gradients and optimizer state alone take {:.1f} "
        "GiB in {}/O1. Use a GPU with more memory, or shard the model across GPUs (--zero_stage 3: "
        "`ampt recommend --zero_stage 3` says from how many ranks it fits).",
        gib(budget), gib(base.persistent()), to_string(precision)));
    return r;
  }
  r.fits = true;
  r.scheme = chosen->scheme;
  r.checkpointing = chosen->checkpointing;
  r.micro_batch = chosen_batch;
  r.grad_accum = global_batch / chosen_batch;
  r.estimate_bytes = total_of(dims, *chosen, optimizer, momentum, chosen_batch, sharding);

  if (precision == Precision::bf16) {
    r.reasons.push_back(fmt::format(
        "bf16: compute capability {:.1f} has bf16 tensor cores; bf16 keeps fp32's exponent "
        "range, so there is no loss scaler and no skipped steps, at the same memory as fp16.",
        gpu.compute_capability));
  } else {
    r.reasons.push_back(fmt::format(
        "fp16 with the dynamic loss scaler: compute capability {:.1f} has no bf16 tensor cores "
        "(they start at 8.0).",
        gpu.compute_capability));
  }
  if (gpu.compute_capability >= 8.9 && scheme_applies({Precision::fp8, OptLevel::O1}, dims)) {
    const Candidate fp8{{Precision::fp8, OptLevel::O1}, r.checkpointing};
    r.reasons.push_back(fmt::format(
        "fp8 (--mixed_precision fp8) would run in e4m3 the Linear layers that measure faster "
        "so on this GPU (--fp8_layers auto), at about the same memory ({:.1f} GiB at this "
        "micro-batch); check its loss against bf16 with `ampt compare` first.",
        gib(total_of(dims, fp8, optimizer, momentum, chosen_batch, sharding))));
  }
  const auto o1 =
      estimate(dims, {precision, OptLevel::O1}, optimizer, momentum, chosen_batch, sharding);
  const auto o2 =
      estimate(dims, {precision, OptLevel::O2}, optimizer, momentum, chosen_batch, sharding);
  const double params = static_cast<double>(count_parameters(dims).total);
  if (!scheme_runs({precision, OptLevel::O2}, dims, sharding)) {
    r.reasons.push_back(
        "O1: O2 does not run beside ZeRO and expert parallelism (the experts, which stay whole "
        "on their ranks outside ZeRO's shards, would have no fp32 masters).");
  } else if (dims.lora.active() && r.scheme.opt_level == OptLevel::O1) {
    // The frozen base is held in half under either opt level: only the adapters differ.
    const double trainable = static_cast<double>(count_parameters(dims).trainable);
    const auto per_trainable = [trainable](const MemoryEstimate& m) {
      return static_cast<double>(m.persistent() - m.frozen_weights) / trainable;
    };
    r.reasons.push_back(fmt::format(
        "O1: the frozen base is held in {} under either opt level; the adapters' fp32 weights "
        "with per-op casts ({:.0f} bytes per trainable parameter) fit, without O2's second copy "
        "to keep consistent; O2 (half adapters, fp32 masters: {:.0f} bytes per trainable "
        "parameter, and half activations) would save {:.1f} GiB at this micro-batch.",
        to_string(precision), per_trainable(o1), per_trainable(o2), gib(o1.total() - o2.total())));
  } else if (r.scheme.opt_level == OptLevel::O1 && sharding.active() && sharding.zero_stage >= 3) {
    r.reasons.push_back(fmt::format(
        "O1: under ZeRO-3 the blocks are gathered in {} under either opt level; O1 keeps the root "
        "(embeddings, final norm, head) in fp32 with per-op casts ({:.2f} bytes per parameter "
        "per rank); O2 (the root in {} too: {:.2f}) would save {:.1f} GiB at this micro-batch.",
        to_string(precision), static_cast<double>(o1.persistent()) / params, to_string(precision),
        static_cast<double>(o2.persistent()) / params, gib(o1.total() - o2.total())));
  } else if (r.scheme.opt_level == OptLevel::O1) {
    r.reasons.push_back(fmt::format(
        "O1: fp32 weights with per-op casts ({:.0f} bytes per parameter with the cast copies) "
        "fit, without O2's second copy of the weights to keep consistent; O2 (half weights and "
        "gradients, fp32 masters: {:.0f} bytes per parameter) would save {:.1f} GiB at this "
        "micro-batch.",
        static_cast<double>(o1.persistent()) / params, static_cast<double>(o2.persistent()) / params,
        gib(o1.total() - o2.total())));
  } else {
    r.reasons.push_back(fmt::format(
        "O2: its half-precision activations ({:.1f} GiB less than O1 at this micro-batch) are what "
        "lets micro-batch {} fit; O1 fits at most {}.",
        gib(o1.activations - o2.activations), chosen_batch,
        largest_fitting(dims, {{precision, OptLevel::O1}, r.checkpointing}, optimizer, momentum,
                        global_batch, budget, sharding)));
  }
  if (can_checkpoint) {
    const int64_t without = largest_fitting(dims, {r.scheme, false}, optimizer, momentum,
                                            global_batch, budget, sharding);
    r.reasons.push_back(
        r.checkpointing
            ? fmt::format("Activation checkpointing (--grad_ckpt) on: without it only a "
                          "micro-batch of {} fits; recomputing each block costs about a third "
                          "more compute.",
                          without)
            : "Activation checkpointing off: the micro-batch fits without recomputation.");
  }
  const auto all = divisors(global_batch);
  const auto next = std::ranges::upper_bound(all, chosen_batch);
  r.reasons.push_back(fmt::format(
      "Micro-batch {}: the largest divisor of the global batch {} whose estimate ({:.1f} GiB) fits "
      "the {:.1f} GiB usable{}; gradient accumulation {} gives the global batch.",
      chosen_batch, global_batch, gib(r.estimate_bytes), gib(budget),
      next == all.end()
          ? ""
          : fmt::format(" ({} would need {:.1f} GiB)", *next,
                        gib(total_of(dims, *chosen, optimizer, momentum, *next, sharding))),
      r.grad_accum));
  return r;
}

Scheme run_scheme(const config::Config& config, const GpuTarget& gpu) {
  using config::MixedPrecision;
  const auto requested = config.mixed_precision;
  if (requested == MixedPrecision::no || config.amp_opt_level == OptLevel::O0) {
    return {Precision::fp32, OptLevel::O0};
  }
  const int capability = capability_of(gpu);
  const Precision automatic = auto_precision(gpu);
  const OptLevel level = config.amp_opt_level == OptLevel::O2 ? OptLevel::O2 : OptLevel::O1;
  switch (requested) {
    case MixedPrecision::fp8:
      return capability >= 89 ? Scheme{Precision::fp8, OptLevel::O1} : Scheme{automatic, level};
    case MixedPrecision::bf16:
      return {capability >= 80 ? Precision::bf16 : Precision::fp16, level};
    case MixedPrecision::fp16:
      return {Precision::fp16, level};
    default:
      return {automatic, level};
  }
}

RanksToFit fewest_ranks(const ModelDims& dims, const Scheme& scheme, bool checkpointing,
                        config::OptimizerKind optimizer, double momentum, int64_t micro_batch,
                        const GpuTarget& gpu, const Sharding& sharding, int64_t max_ranks) {
  const int64_t budget = usable_bytes(gpu);
  const auto whole = estimate_memory(dims, scheme, optimizer, momentum, micro_batch);
  const auto per_rank = [&](int64_t ranks) {
    Sharding s = sharding;
    s.world_size = ranks;
    s.zero_stage = 3;
    const auto m = shard_memory(whole, dims, scheme, s);
    return std::pair{checkpointing && m.activations_checkpointed >= 0 ? m.total_checkpointed()
                                                                       : m.total(),
                     m.sharded};
  };
  RanksToFit r;
  // Expert parallelism's groups need as many ranks as each divides the experts among.
  const int64_t least = std::max<int64_t>(1, sharding.expert_parallel);
  // The same on any number of ranks from 2 (up to the rounding of the slices).
  const auto [two, sharded_on_two] = per_rank(std::max<int64_t>(2, least));
  r.unsharded = two - sharded_on_two;
  int64_t fewer = -1;
  for (int64_t ranks = least; ranks <= max_ranks; ranks *= 2) {
    const int64_t bytes = per_rank(ranks).first;
    r.bytes = bytes;
    if (bytes <= budget) {
      r.ranks = ranks;
      r.fewer_bytes = fewer;
      return r;
    }
    fewer = bytes;
  }
  return r;
}

}  // namespace ampt::plan
