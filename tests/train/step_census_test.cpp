// --profile's step census: what it counts on hand-made operations (operators, views, nested
// work, conversions of parameters and gradients, host waits, autograd nodes), and on a GPT's
// O1 step with and without the half working weights, on a step that logs and one that does not.
#include "ampt/train/step_census.h"

#include <ATen/record_function.h>

#include "support/json_field.h"
#include "support/process.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <map>
#include <regex>

using ampt::test::make_temp_dir;
using ampt::test::run_ampt;

namespace {

struct CensusLine {
  int64_t step = 0, operators = 0, conversions = 0, parameter_conversions = 0,
          ampt_conversions = 0, ampt_parameter_conversions = 0, syncs = 0, nodes = 0;
  std::string ampt_ops;  // "ampt::fused_adamw 12, ..." or empty
};

// The census line of `step` in a run's output.
CensusLine census_of(const std::string& out, int64_t step) {
  const std::regex line(
      "\\[PERF\\] Step census \\(step " + std::to_string(step) +
      "\\): ([0-9]+) operators, ([0-9]+) dtype conversions \\([0-9.]+ MiB, ([0-9]+) of "
      "parameters or their gradients\\), of which ([0-9]+) inside ampt operations \\([0-9.]+ "
      "MiB, ([0-9]+) of parameters or their gradients(: ([^)]*))?\\), ([0-9]+) host "
      "synchronisations, ([0-9]+) autograd nodes");
  std::smatch m;
  if (!std::regex_search(out, m, line)) FAIL("no census line for step " << step << " in\n" << out);
  return {step,
          std::stoll(m[1]),
          std::stoll(m[2]),
          std::stoll(m[3]),
          std::stoll(m[4]),
          std::stoll(m[5]),
          std::stoll(m[8]),
          std::stoll(m[9]),
          m[7]};
}

}  // namespace

TEST_CASE("step census: operators, views, nested work, conversions, waits and nodes",
          "[train][census]") {
  auto weight = torch::randn({4, 3}, torch::requires_grad());
  const auto x = torch::randn({2, 3});
  ampt::train::StepCensusRecorder census({weight});
  census.begin(7);
  const auto y = x.view({3, 2}).t();           // views: no operator
  const auto z = y.contiguous();               // a copy inside a view-like call: one operator
  const auto w16 = weight.to(torch::kBFloat16);  // a parameter's conversion: one operator
  const auto h = x.to(torch::kBFloat16);       // an activation's conversion
  const auto out = at::linear(h, w16).sum();   // linear's own nested ops count once; sum once
  out.backward();                              // nodes: Sum, linear's, ToCopy, AccumulateGrad
  census.note_gradients({weight.grad()});
  const double value = out.item<double>();     // a wait for the device
  (void)value;
  (void)z;
  const auto c = census.end();
  CHECK(c.counts.step == 7);
  CHECK(c.operator_calls.count("aten::view") == 0);
  CHECK(c.operator_calls.at("aten::contiguous") == 1);
  CHECK(c.operator_calls.at("aten::linear") == 1);
  CHECK(c.operator_calls.count("aten::addmm") == 0);  // inside linear
  CHECK(c.operator_calls.at("aten::item") == 1);
  // Forward: the weight and x; backward: the weight's bf16 gradient back to fp32.
  CHECK(c.counts.conversions == 3);
  CHECK(c.counts.parameter_conversions == 2);
  CHECK(c.counts.conversion_bytes == 12 * 6 + 6 * 6 + 12 * 6);
  CHECK(c.counts.host_syncs == 1);
  CHECK(c.sync_calls.at("aten::item") == 1);
  CHECK(c.node_calls.count("torch::autograd::AccumulateGrad") == 1);
  CHECK(c.counts.autograd_nodes >= 4);
  // Nothing is counted between steps, and each step starts from nothing.
  (void)torch::ones({2}).add(1);
  census.begin(8);
  const auto empty = census.end();
  CHECK(empty.counts.step == 8);
  CHECK(empty.counts.operators == 0);
  CHECK(empty.counts.conversions == 0);
}

TEST_CASE("step census: conversions inside an ampt operation count, and apart, the operation "
          "once",
          "[train][census]") {
  auto weight = torch::randn({4, 3}, torch::requires_grad());
  auto half_copy = torch::empty({4, 3}, torch::kBFloat16);
  const auto x = torch::randn({2, 3});
  ampt::train::StepCensusRecorder census({weight});
  census.begin(1);
  {
    // As the CPU's AdamW writes the half working weights after its step, inside its scope.
    RECORD_FUNCTION("ampt::test_optimizer", std::vector<c10::IValue>());
    const at::NoGradGuard no_grad;
    at::_foreach_copy_(std::vector<torch::Tensor>{half_copy}, std::vector<torch::Tensor>{weight});
    (void)x.to(torch::kBFloat16);  // an activation's conversion inside it
    (void)x.sum().item<double>();  // a host read inside it: the kernel's, not a wait
  }
  (void)x.to(torch::kHalf);  // and one outside
  const auto c = census.end();
  CHECK(c.counts.operators == 2);  // the ampt operation once, the cast outside
  CHECK(c.operator_calls.at("ampt::test_optimizer") == 1);
  // The foreach copy's per-tensor copy_ on a CPU is not counted a second time.
  CHECK(c.counts.conversions == 3);
  CHECK(c.counts.conversion_bytes == 12 * 6 + 6 * 6 + 6 * 6);
  CHECK(c.counts.parameter_conversions == 1);  // the weight into its half copy
  CHECK(c.counts.ampt_parameter_conversions == 1);
  CHECK(c.counts.ampt_conversions == 2);
  CHECK(c.counts.ampt_conversion_bytes == 12 * 6 + 6 * 6);
  CHECK(c.counts.ampt_conversion_ops == std::map<std::string, int64_t>{{"ampt::test_optimizer", 2}});
  CHECK(c.counts.host_syncs == 0);
  CHECK_THAT(c.json(), Catch::Contains("\"ampt_conversions\": 2, \"ampt_conversion_bytes\": 108, "
                                       "\"ampt_parameter_conversions\": 1"));
}

TEST_CASE("step census: a GPT's O1 step with half weights converts parameters only inside the "
          "optimizer's pass, and waits for the host only when it logs",
          "[train][census][cli]") {
  const auto run = [](const std::vector<std::string>& extra) {
    std::vector<std::string> args{"train", "--model", "gpt-tiny", "--mixed_precision", "bf16",
                                  "--batch_size", "1", "--max_steps", "4", "--log_every", "4",
                                  "--profile", "3-4", "--output_dir", make_temp_dir(),
                                  "--val_fraction", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_ampt(args);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return r.out;
  };
  const auto copies = run({});
  const auto casts = run({"--half_weights=false"});
  const auto quiet = census_of(copies, 3), logged = census_of(copies, 4);
  const auto cast = census_of(casts, 3);
  INFO(copies);
  // Each parameter's conversions happen inside ampt's operations: the optimizer's pass writes
  // the half working weights from the fp32 masters, the weight-gradient GEMMs add into fp32
  // gradients (one pass each on a GPU, a second pass over the result on a CPU).
  CHECK(quiet.parameter_conversions > 0);
  CHECK(quiet.ampt_parameter_conversions == quiet.parameter_conversions);
  CHECK_THAT(quiet.ampt_ops, Catch::Contains("ampt::fused_adamw"));
  CHECK_THAT(quiet.ampt_ops, Catch::Contains("ampt::matmul_fp32"));
  CHECK(quiet.syncs == 0);
  CHECK(logged.syncs > 0);  // the log line reads the loss, norm and scale
  // Autocast's path casts every Linear weight and bias forward and their gradients back, as
  // operators of their own.
  CHECK(cast.parameter_conversions > cast.ampt_parameter_conversions);
  CHECK_THAT(cast.ampt_ops, !Catch::Contains("ampt::fused_adamw"));  // no half copies to write
  CHECK(quiet.conversions - quiet.ampt_conversions < cast.conversions - cast.ampt_conversions);
  CHECK(quiet.nodes < cast.nodes);
  CHECK_THAT(copies, Catch::Contains("step census by operator"));
}
