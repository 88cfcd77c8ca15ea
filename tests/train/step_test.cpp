// The training step and the speed switches around it: the CUDA-graph fallback and, on a GPU,
// a graphed step equal to the eager one; grad_ckpt and TF32 through whole runs.
#include "ampt/train/step.h"

#include "ampt/precision/autocast_guard.h"
#include "ampt/train/trainer.h"
#include "ampt/train/tuning.h"
#include "support/process.h"
#include "support/skip.h"
#include "support/run_recorder.h"

#include <ATen/Context.h>
#include <catch2/catch.hpp>
#include <torch/torch.h>

using ampt::test::Recorder;

namespace {

using ampt::config::Config;

Config gpt_run() {
  Config config;
  config.output_dir = ampt::test::make_temp_dir();
  config.device = ampt::config::DeviceKind::cpu;
  config.model = "gpt-tiny";
  config.synthetic_samples = 512;
  config.batch_size = 8;
  config.max_steps = 12;
  config.log_every = 1;
  config.eval_batches = 1;
  return config;
}

}  // namespace

TEST_CASE("cuda_graphs on a CPU: one line says why, and the run is the eager run",
          "[train][step][cuda_graphs]") {
  auto config = gpt_run();
  config.grad_accum_steps = 2;
  Recorder eager;
  ampt::train::run_training(config, {}, eager);
  config.cuda_graphs = true;
  config.output_dir = ampt::test::make_temp_dir();
  Recorder fallback;
  ampt::train::run_training(config, {}, fallback);
  CHECK(fallback.info.speed_notes ==
        std::vector<std::string>{
            "CUDA graphs: off, the run is on cpu, CUDA graphs need a GPU; the step runs eagerly"});
  CHECK(eager.info.speed_notes.empty());
  CHECK(fallback.losses == eager.losses);
  const torch::Device gpu(torch::kCUDA, 0);
  CHECK(ampt::train::cuda_graph_obstacle(gpu, true, 0.1, false) ==
        "grad_ckpt with dropout > 0 reads RNG states per step");
  CHECK(ampt::train::cuda_graph_obstacle(gpu, false, 0.0, true) ==
        "packed examples change the attention's number of sequences every step");
  CHECK(ampt::train::cuda_graph_obstacle(gpu, true, 0.0, false).empty());
}

TEST_CASE("grad_ckpt: a whole run's losses equal the plain run's", "[train][step][grad_ckpt]") {
  auto config = gpt_run();
  config.dropout = 0.1;
  Recorder plain;
  ampt::train::run_training(config, {}, plain);
  config.grad_ckpt = true;
  config.output_dir = ampt::test::make_temp_dir();
  Recorder checkpointed;
  ampt::train::run_training(config, {}, checkpointed);
  REQUIRE(plain.losses.size() == 12);
  CHECK(checkpointed.losses == plain.losses);
  CHECK_THAT(checkpointed.info.architecture, Catch::Contains("blocks recomputed in backward"));
}

TEST_CASE("allow_tf32 sets cuBLAS and cuDNN TF32 together", "[train][step][tf32]") {
  CHECK(ampt::train::apply_tf32(true, torch::kCPU) == "TF32: requested, no effect on cpu");
  CHECK(at::globalContext().allowTF32CuBLAS());
  CHECK(at::globalContext().allowTF32CuDNN());
  CHECK(ampt::train::apply_tf32(false, torch::kCPU).empty());
  CHECK_FALSE(at::globalContext().allowTF32CuBLAS());
  CHECK_FALSE(at::globalContext().allowTF32CuDNN());
}

// On a GPU only: the graph must do exactly what the eager step does, replay after replay.
TEST_CASE("cuda_graphs: graphed steps equal eager steps on a GPU", "[train][step][cuda_graphs][cuda]") {
  if (!torch::cuda::is_available()) {
    AMPT_SKIP(gpu, "no CUDA device: the graphed-step comparison needs one");
  }
  const torch::Device device(torch::kCUDA, 0);
  for (auto precision : {c10::kFloat, c10::kBFloat16}) {
    INFO("autocast " << c10::toString(precision));
    Config config;
    config.max_grad_norm = 0.5;
    struct Side {
      torch::nn::Sequential net;
      std::unique_ptr<ampt::precision::LossScaler> scaler;
      std::unique_ptr<ampt::train::Optimizer> optimizer;
      std::unique_ptr<ampt::train::TrainStep> step;
      torch::Tensor overflows;
    };
    const auto make_side = [&](bool graphed) {
      torch::manual_seed(3);
      Side s;
      s.net = torch::nn::Sequential(torch::nn::Linear(32, 64), torch::nn::GELU(),
                                    torch::nn::Dropout(0.1), torch::nn::Linear(64, 10));
      s.net->to(device);
      s.scaler = std::make_unique<ampt::precision::LossScaler>(
          ampt::precision::LossScalerOptions{precision == c10::kFloat ? false : true}, device);
      ampt::NamedTensors named;
      for (const auto& item : s.net->named_parameters()) named.emplace_back(item.key(), item.value());
      s.optimizer = ampt::train::make_optimizer(config, named);
      s.overflows = torch::zeros({}, torch::dtype(torch::kFloat32).device(device));
      ampt::train::StepParts parts;
      auto net = s.net;
      parts.objective = ampt::train::token_cross_entropy(
          [net, precision](const ampt::data::Batch& b, torch::Tensor*) mutable {
            ampt::precision::AutocastGuard autocast(c10::kCUDA, precision, precision != c10::kFloat);
            return torch::nn::functional::cross_entropy(net->forward(b.inputs), b.targets);
          },
          /*every_target_scored=*/false);
      parts.parameters = s.net->parameters();
      parts.scaler = s.scaler.get();
      parts.optimizer = s.optimizer.get();
      parts.max_grad_norm = config.max_grad_norm;
      parts.overflow_steps = s.overflows;
      s.step = std::make_unique<ampt::train::TrainStep>(std::move(parts), graphed);
      return s;
    };
    auto eager = make_side(false);
    auto graphed = make_side(true);
    for (int i = 0; i < 8; ++i) {
      std::vector<ampt::data::Batch> batches{{torch::randn({16, 32}, device),
                                              torch::randint(0, 10, {16}, torch::dtype(torch::kInt64).device(device))}};
      const double lr = 1e-2 * (i + 1);
      // The same dropout masks: both sides start each step from the same generator state.
      const auto rng = at::globalContext().defaultGenerator(device).get_state();
      const auto a = eager.step->run(batches, lr, true);
      const double loss_a = a.loss.item<double>();
      auto generator = at::globalContext().defaultGenerator(device);
      generator.set_state(rng);
      const auto b = graphed.step->run(batches, lr, true);
      INFO("step " << i + 1);
      CHECK(b.loss.item<double>() == loss_a);
      const auto pa = eager.net->parameters();
      const auto pb = graphed.net->parameters();
      for (size_t k = 0; k < pa.size(); ++k) CHECK(torch::allclose(pa[k], pb[k], 1e-5, 1e-7));
    }
    CHECK(graphed.step->captured());
  }
}

// bf16 and fp32 steps have no scale to divide by, so they skip GradScaler's unscale pass and find
// non-finite gradients from the norms clipping computes: the step must still be skipped, weights
// and optimizer state untouched, exactly as a scaled step's.
TEST_CASE("an unscaled step skips a non-finite gradient as a scaled one does", "[train][step]") {
  for (const bool scaled : {false, true}) {
    INFO((scaled ? "scaler on (fp16)" : "scaler off (bf16, fp32)"));
    auto w = torch::ones({4}).requires_grad_(true);
    auto b = torch::zeros({1}).requires_grad_(true);
    Config config;
    auto optimizer = ampt::train::make_optimizer(config, {{"w", w}, {"b", b}});
    ampt::precision::LossScalerOptions options;
    options.enabled = scaled;
    options.init_scale = 4.0;
    ampt::precision::LossScaler scaler(options, torch::kCPU);
    ampt::train::StepParts parts;
    parts.objective = ampt::train::token_cross_entropy(
        [&](const ampt::data::Batch& batch, torch::Tensor*) { return (w * batch.inputs).sum() + b.sum(); },
        /*every_target_scored=*/false);
    parts.parameters = {w, b};
    parts.scaler = &scaler;
    parts.optimizer = optimizer.get();
    parts.max_grad_norm = 1.0;
    parts.overflow_steps = torch::zeros({});
    ampt::train::TrainStep step(parts, /*graphed=*/false);
    const auto state_of = [&] {
      std::vector<torch::Tensor> out{w.detach().clone(), b.detach().clone()};
      for (const auto& [name, t] : optimizer->state()) out.push_back(t.clone());
      return out;
    };
    const auto same = [](const std::vector<torch::Tensor>& x, const std::vector<torch::Tensor>& y) {
      for (size_t i = 0; i < x.size(); ++i) {
        if (!torch::equal(x[i], y[i])) return false;
      }
      return x.size() == y.size();
    };
    const auto inf = std::numeric_limits<float>::infinity();
    const auto nan = std::numeric_limits<float>::quiet_NaN();
    // The step divides each loss by the step's count of scored targets: here one.
    const auto one_target = torch::zeros({1}, torch::kInt64);

    step.run({{torch::tensor({1.0F, 2.0F, 3.0F, 4.0F}), one_target}}, 0.1, false);
    CHECK(parts.overflow_steps.item<float>() == 0.0F);
    CHECK_FALSE(w.grad().defined());  // set to none after the step
    const auto before = state_of();
    CHECK_FALSE(torch::equal(before[0], torch::ones({4})));  // the clean step moved the weights

    for (const auto bad : {inf, -inf, nan}) {
      INFO("gradient element " << bad);
      step.run({{torch::tensor({1.0F, bad, 3.0F, 4.0F}), one_target}}, 0.1, false);
      CHECK(same(state_of(), before));
    }
    CHECK(parts.overflow_steps.item<float>() == 3.0F);
    step.run({{torch::tensor({1.0F, 2.0F, 3.0F, 4.0F}), one_target}}, 0.1, false);
    CHECK(parts.overflow_steps.item<float>() == 3.0F);
    CHECK_FALSE(same(state_of(), before));
  }
}
