// The spellings of Config's enums, shared by every parser and printer of configuration values.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "ampt/config/config.h"

namespace ampt::config {

// A table of (spelling, value) pairs; several spellings may map to one value (aliases).
template <class E, std::size_t N>
using Spellings = std::array<std::pair<std::string_view, E>, N>;

template <class E>
struct EnumNames;  // specialised for each Config enum: `values` lists its one spelling per value

template <>
struct EnumNames<MixedPrecision> {
  static constexpr Spellings<MixedPrecision, 5> values{{{"no", MixedPrecision::no},
                                                        {"fp16", MixedPrecision::fp16},
                                                        {"bf16", MixedPrecision::bf16},
                                                        {"auto", MixedPrecision::auto_select},
                                                        {"fp8", MixedPrecision::fp8}}};
};

template <>
struct EnumNames<OptLevel> {
  static constexpr Spellings<OptLevel, 3> values{
      {{"O0", OptLevel::O0}, {"O1", OptLevel::O1}, {"O2", OptLevel::O2}}};
};

template <>
struct EnumNames<DeviceKind> {
  static constexpr Spellings<DeviceKind, 3> values{
      {{"auto", DeviceKind::auto_select}, {"cpu", DeviceKind::cpu}, {"cuda", DeviceKind::cuda}}};
};

template <>
struct EnumNames<OptimizerKind> {
  static constexpr Spellings<OptimizerKind, 2> values{
      {{"adamw", OptimizerKind::adamw}, {"sgd", OptimizerKind::sgd}}};
};

template <>
struct EnumNames<Objective> {
  static constexpr Spellings<Objective, 7> values{{{"lm", Objective::lm},
                                                   {"dpo", Objective::dpo},
                                                   {"ipo", Objective::ipo},
                                                   {"simpo", Objective::simpo},
                                                   {"orpo", Objective::orpo},
                                                   {"grpo", Objective::grpo},
                                                   {"distill", Objective::distill}}};
};

template <>
struct EnumNames<GrpoLossType> {
  static constexpr Spellings<GrpoLossType, 4> values{{{"grpo", GrpoLossType::grpo},
                                                      {"dr_grpo", GrpoLossType::dr_grpo},
                                                      {"dapo", GrpoLossType::dapo},
                                                      {"bnpo", GrpoLossType::bnpo}}};
};

template <>
struct EnumNames<ScaleRewards> {
  static constexpr Spellings<ScaleRewards, 3> values{
      {{"group", ScaleRewards::group}, {"batch", ScaleRewards::batch}, {"none", ScaleRewards::none}}};
};

template <>
struct EnumNames<ImportanceSamplingLevel> {
  static constexpr Spellings<ImportanceSamplingLevel, 2> values{
      {{"token", ImportanceSamplingLevel::token}, {"sequence", ImportanceSamplingLevel::sequence}}};
};

template <>
struct EnumNames<Sampler> {
  static constexpr Spellings<Sampler, 2> values{{{"exact", Sampler::exact}, {"fast", Sampler::fast}}};
};

template <>
struct EnumNames<ImportanceSamplingMode> {
  static constexpr Spellings<ImportanceSamplingMode, 4> values{
      {{"token_truncate", ImportanceSamplingMode::token_truncate},
       {"token_mask", ImportanceSamplingMode::token_mask},
       {"sequence_truncate", ImportanceSamplingMode::sequence_truncate},
       {"sequence_mask", ImportanceSamplingMode::sequence_mask}}};
};

template <>
struct EnumNames<Sampling> {
  static constexpr Spellings<Sampling, 2> values{
      {{"random", Sampling::random}, {"sequential", Sampling::sequential}}};
};

template <>
struct EnumNames<ScalerRules> {
  static constexpr Spellings<ScalerRules, 2> values{
      {{"torch", ScalerRules::torch}, {"deepspeed", ScalerRules::deepspeed}}};
};

template <>
struct EnumNames<Fp8AmaxAlgo> {
  static constexpr Spellings<Fp8AmaxAlgo, 2> values{
      {{"max", Fp8AmaxAlgo::max}, {"most_recent", Fp8AmaxAlgo::most_recent}}};
};

template <>
struct EnumNames<Fp8Scaling> {
  static constexpr Spellings<Fp8Scaling, 3> values{{{"delayed", Fp8Scaling::delayed},
                                                    {"current", Fp8Scaling::current},
                                                    {"rowwise", Fp8Scaling::rowwise}}};
};

template <>
struct EnumNames<DistBackend> {
  static constexpr Spellings<DistBackend, 3> values{{{"auto", DistBackend::auto_select},
                                                     {"nccl", DistBackend::nccl},
                                                     {"gloo", DistBackend::gloo}}};
};

template <>
struct EnumNames<ReduceDtype> {
  static constexpr Spellings<ReduceDtype, 3> values{{{"grad", ReduceDtype::grad},
                                                     {"fp32", ReduceDtype::fp32},
                                                     {"bf16", ReduceDtype::bf16}}};
};

template <>
struct EnumNames<ParamDtype> {
  static constexpr Spellings<ParamDtype, 4> values{{{"auto", ParamDtype::auto_select},
                                                    {"fp32", ParamDtype::fp32},
                                                    {"bf16", ParamDtype::bf16},
                                                    {"fp16", ParamDtype::fp16}}};
};

template <>
struct EnumNames<BaseDtype> {
  static constexpr Spellings<BaseDtype, 6> values{{{"auto", BaseDtype::auto_select},
                                                    {"nf4", BaseDtype::nf4},
                                                    {"int8", BaseDtype::int8},
                                                    {"fp8", BaseDtype::fp8},
                                                    {"bf16", BaseDtype::bf16},
                                                    {"fp16", BaseDtype::fp16}}};
};

// Exact, case-sensitive lookup: "BF16" is rejected so that files stay greppable.
template <class E, std::size_t N>
std::optional<E> find_spelling(const Spellings<E, N>& table, std::string_view text) {
  for (const auto& [spelling, value] : table) {
    if (spelling == text) return value;
  }
  return std::nullopt;
}

// "no, fp16, bf16": the allowed list quoted by error messages and --help.
template <class E, std::size_t N>
std::string join_spellings(const Spellings<E, N>& table, std::string_view separator = ", ") {
  std::string joined;
  for (const auto& [spelling, value] : table) {
    if (!joined.empty()) joined += separator;
    joined += spelling;
  }
  return joined;
}

template <class E>
requires requires { EnumNames<E>::values; }
std::string_view to_string(E value) {
  for (const auto& [spelling, candidate] : EnumNames<E>::values) {
    if (candidate == value) return spelling;
  }
  return "?";  // unreachable for values created through the enum's named constants
}

}  // namespace ampt::config
