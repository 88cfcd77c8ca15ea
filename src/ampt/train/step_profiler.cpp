#include "ampt/train/step_profiler.h"

#include "ampt/core/errors.h"

#include <fmt/format.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <utility>

namespace ampt::train {
namespace {

namespace profiler = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

std::set<ActivityType> activities(const c10::Device& device) {
  if (device.is_cuda()) return {ActivityType::CPU, ActivityType::CUDA};
  return {ActivityType::CPU};
}

std::string kind_of(const profiler::KinetoEvent& event) {
  if (event.name().starts_with("ampt::")) return "phase";
  return event.deviceType() == c10::DeviceType::CUDA ? "cuda" : "cpu";
}

std::vector<OpRow> op_rows(const profiler::ProfilerResult& result, int64_t steps) {
  std::map<std::pair<std::string, std::string>, std::pair<int64_t, uint64_t>> totals;
  for (const auto& event : result.events()) {
    auto& [calls, ns] = totals[{kind_of(event), event.name()}];
    ++calls;
    ns += event.durationNs();
  }
  std::vector<OpRow> rows;
  const auto per_step = static_cast<double>(steps);
  for (const auto& [key, value] : totals) {
    rows.push_back({key.second, key.first, static_cast<double>(value.first) / per_step,
                    static_cast<double>(value.second) / 1e6 / per_step});
  }
  return rows;
}

}  // namespace

std::string op_table_text(const std::vector<OpRow>& rows, const config::StepRange& steps) {
  // Phases first (they hold everything else), then kernels and operators by time.
  auto sorted = rows;
  std::ranges::stable_sort(sorted, [](const OpRow& a, const OpRow& b) {
    const bool a_phase = a.kind == "phase", b_phase = b.kind == "phase";
    if (a_phase != b_phase) return a_phase;
    return a.ms_per_step > b.ms_per_step;
  });
  std::size_t width = 4;
  for (const auto& row : sorted) width = std::max(width, row.name.size());
  std::string text = fmt::format(
      "# ampt profile of steps {}-{}: per optimizer step, inclusive time (an operator's time "
      "includes the operators it calls)\n{:<{}}  {:<5}  {:>10}  {:>12}\n",
      steps.first, steps.last, "name", width, "kind", "calls/step", "ms/step");
  for (const auto& row : sorted) {
    text += fmt::format("{:<{}}  {:<5}  {:>10.1f}  {:>12.3f}\n", row.name, width, row.kind,
                        row.calls_per_step, row.ms_per_step);
  }
  return text;
}

StepProfiler::StepProfiler(std::optional<config::StepRange> range, std::string output_dir,
                           c10::Device device, int64_t rank,
                           std::vector<torch::Tensor> parameters)
    : range_(range), output_dir_(std::move(output_dir)), device_(device), rank_(rank) {
  if (!range_) return;
  profiler::prepareProfiler(ProfilerConfig(ProfilerState::KINETO, /*report_input_shapes=*/true),
                            activities(device_));
  census_.emplace(std::move(parameters));
}

StepProfiler::~StepProfiler() {
  // A run that failed mid-range leaves no trace behind, but must not leave the profiler on.
  if (first_traced_ > 0) profiler::disableProfiler();
}

void StepProfiler::before_step(int64_t step) {
  if (!range_ || done_ || !range_->contains(step)) return;
  if (first_traced_ == 0) {
    first_traced_ = step;
    profiler::enableProfiler(
        ProfilerConfig(ProfilerState::KINETO, /*report_input_shapes=*/true), activities(device_));
  }
  census_->begin(step);
  counting_ = true;
}

void StepProfiler::gradients_ready(const std::vector<torch::Tensor>& gradients) {
  if (counting_) census_->note_gradients(gradients);
}

std::optional<StepCensus> StepProfiler::take_census(int64_t step) {
  if (!counting_) return std::nullopt;
  counting_ = false;
  auto census = census_->end();
  census.counts.step = step;
  census_lines_.push_back(census.json());
  return census;
}

std::optional<ProfileFiles> StepProfiler::after_step(int64_t step) {
  if (first_traced_ == 0 || step < range_->last) return std::nullopt;
  return stop(step);
}

std::optional<ProfileFiles> StepProfiler::finish(int64_t last_step) {
  if (first_traced_ == 0) return std::nullopt;
  return stop(last_step);
}

std::string StepProfiler::base_path(const config::StepRange& steps,
                                    const std::string& extension) const {
  const auto suffix = rank_ > 0 ? fmt::format(".rank{}", rank_) : std::string();
  return (std::filesystem::path(output_dir_) /
          fmt::format("profile-steps-{}-{}{}{}", steps.first, steps.last, suffix, extension))
      .string();
}

ProfileFiles StepProfiler::stop(int64_t last_step) {
  if (counting_) take_census(last_step);
  // Kernels still queued would be missing from the trace.
  if (device_.is_cuda()) torch::cuda::synchronize(device_.index());
  const auto result = profiler::disableProfiler();
  ProfileFiles files;
  files.steps = {first_traced_, last_step};
  first_traced_ = 0;
  done_ = true;
  files.trace = base_path(files.steps, ".json");
  files.table = base_path(files.steps, ".txt");
  files.census = base_path(files.steps, ".census.jsonl");
  std::filesystem::create_directories(output_dir_);
  result->save(files.trace);
  std::ofstream table(files.table, std::ios::trunc);
  table << op_table_text(op_rows(*result, files.steps.last - files.steps.first + 1), files.steps);
  if (!table.flush()) throw RuntimeError(fmt::format("cannot write '{}'", files.table));
  std::ofstream census(files.census, std::ios::trunc);
  for (const auto& line : std::exchange(census_lines_, {})) census << line << '\n';
  if (!census.flush()) throw RuntimeError(fmt::format("cannot write '{}'", files.census));
  return files;
}

}  // namespace ampt::train
