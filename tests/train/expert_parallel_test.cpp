// Expert parallelism's exchange inside one layer: 2 Gloo ranks (threads) that divide 8 experts
// send every (token, expert) row to the expert's rank and back. Each rank's output and input
// gradient equal a whole layer's on its own tokens, and each rank's expert gradients equal the
// whole layer's summed over both ranks' tokens, also when a rank's experts get no row at all; a
// save's gather brings rank 0 the whole stack. And what expert parallelism refuses, one line each.
#include "ampt/train/expert_parallel.h"

#include "ampt/checkpoint/checkpoint.h"
#include "ampt/distributed/data_parallel.h"
#include "ampt/distributed/process_group.h"
#include "ampt/models/llama_presets.h"
#include "distributed/dist_fixtures.h"
#include "distributed/rank_processes.h"
#include "support/process.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <cstdlib>
#include <exception>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace models = ampt::models;

constexpr int64_t kExperts = 8, kEmbd = 16, kWidth = 8, kTokens = 6, kTopK = 2;

struct RankInput {
  torch::Tensor x;         // [kTokens, kEmbd]
  models::Routing routing;  // [kTokens, kTopK]
  torch::Tensor upstream;  // the output's gradient
};

// Rank r's tokens; with `low_experts_only`, every token picks among experts 0-3 (rank 0's), so
// that rank 1's experts receive no row from anyone.
RankInput rank_input(int64_t rank, bool low_experts_only) {
  auto generator = at::detail::createCPUGenerator(100 + rank);
  RankInput in;
  in.x = torch::randn({kTokens, kEmbd}, generator, torch::kFloat32);
  const int64_t choices = low_experts_only ? kExperts / 2 : kExperts;
  // Token t picks experts t and t + 1 + rank (mod choices): two different ones.
  const auto t = torch::arange(kTokens, torch::kInt64);
  in.routing.experts = torch::stack({t % choices, (t + 1 + rank) % choices}, 1);
  in.routing.weights = torch::rand({kTokens, kTopK}, generator, torch::kFloat32);
  in.upstream = torch::randn({kTokens, kEmbd}, generator, torch::kFloat32);
  return in;
}

void check_exchange(bool low_experts_only) {
  torch::manual_seed(7);
  models::Experts whole(kExperts, kEmbd, kWidth);
  const std::vector<RankInput> inputs{rank_input(0, low_experts_only), rank_input(1, low_experts_only)};
  // The whole layer's results: each rank's output and input gradient, and the expert gradients
  // summed over both ranks' tokens.
  std::vector<torch::Tensor> outputs, input_grads;
  for (const auto& in : inputs) {
    const auto x = in.x.clone().requires_grad_(true);
    const auto y = whole->forward(x, in.routing);
    (y * in.upstream).sum().backward();
    outputs.push_back(y.detach());
    input_grads.push_back(x.grad());
  }
  const auto gate_up_grad = whole->gate_up_proj.grad().clone();
  const auto down_grad = whole->down_proj.grad().clone();

  ampt::test::run_ranks(2, [&](ampt::distributed::Group& group) {
    const auto rank = group.rank();
    auto subgroup = group.subgroup("experts", {0, 1});
    models::Experts mine(kExperts, kEmbd, kWidth, models::ExpertShard{rank, 2});
    {
      torch::NoGradGuard no_grad;
      mine->gate_up_proj.copy_(whole->gate_up_proj.narrow(0, rank * 4, 4));
      mine->down_proj.copy_(whole->down_proj.narrow(0, rank * 4, 4));
    }
    REQUIRE(mine->first_expert() == rank * 4);
    mine->set_exchange(ampt::train::subgroup_exchange(*subgroup));
    const auto& in = inputs[static_cast<size_t>(rank)];
    const auto x = in.x.clone().requires_grad_(true);
    const auto y = mine->forward(x, in.routing);
    (y * in.upstream).sum().backward();
    CHECK(torch::allclose(y, outputs[static_cast<size_t>(rank)], 1e-6, 1e-6));
    CHECK(torch::allclose(x.grad(), input_grads[static_cast<size_t>(rank)], 1e-6, 1e-6));
    CHECK(torch::allclose(mine->gate_up_proj.grad(), gate_up_grad.narrow(0, rank * 4, 4), 1e-6, 1e-6));
    CHECK(torch::allclose(mine->down_proj.grad(), down_grad.narrow(0, rank * 4, 4), 1e-6, 1e-6));
    if (low_experts_only && rank == 1) {
      CHECK(mine->gate_up_proj.grad().abs().max().item<double>() == 0.0);
    }
    // A save's gather: rank 0 alone receives the whole stack, in member order.
    auto gathered = rank == 0 ? torch::empty_like(whole->gate_up_proj) : torch::Tensor();
    auto slice = mine->gate_up_proj.detach().contiguous();
    subgroup->gather(gathered, slice, 0, "the test's gather");
    if (rank == 0) CHECK(torch::equal(gathered, whole->gate_up_proj.detach()));
    if (rank == 1) CHECK(!gathered.defined());
  });
}

}  // namespace

TEST_CASE("expert parallelism: 2 ranks dividing 8 experts compute a whole layer's outputs and "
          "gradients through all_to_all",
          "[train][moe][dist]") {
  SECTION("tokens for every expert") { check_exchange(false); }
  SECTION("no row for rank 1's experts") { check_exchange(true); }
}

namespace {

// A one-process run of qwen3-moe (or `model`) with `extra`, expected to stop at once with `error`.
void check_refused(const std::vector<std::string>& extra, const std::string& error,
                   const std::string& model = "qwen3-moe") {
  std::vector<std::string> args{"train", "--model", model, "--device", "cpu", "--max_steps", "1",
                                "--loader_workers", "0", "--output_dir",
                                ampt::test::make_temp_dir() + "/out"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto run = ampt::test::run_ampt(args);
  INFO(run.out << run.err);
  CHECK(run.exit_code != 0);
  CHECK_THAT(run.err, Catch::Contains(error));
  CHECK_THAT(run.err, !Catch::Contains("terminate"));
}

}  // namespace

TEST_CASE("expert parallelism: each rank's model holds the share of the experts its place in "
          "the data-parallel layer's exchange group says, and its replicas the same share",
          "[train][moe][dist]") {
  // 4 ranks as threads, each joining the job as a process would (DataParallel's own groups),
  // groups of 2 dividing qwen3-moe's 8 experts: ranks 0-1 and 2-3; rank r holds share r % 2.
  ::setenv("TORCH_FR_BUFFER_SIZE", "0", 1);  // as run_ranks: c10d's flight recorder races
  const int64_t world = 4, groups_of = 2;
  const int port = ampt::test::free_port();
  std::vector<int64_t> shard(world, -1), exchange_rank(world, -1), exchange_size(world, -1);
  std::vector<torch::Tensor> shares_seen(world), replica_shards(world);
  std::vector<std::exception_ptr> errors(world);
  std::vector<std::thread> threads;
  for (int64_t rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        ampt::config::Config config;
        config.model = "qwen3-moe";
        config.expert_parallel = groups_of;
        config.dist_backend = ampt::config::DistBackend::gloo;
        config.dist_timeout = 30;
        config.launch.launcher = ampt::config::Launcher::torchrun;
        config.launch.rank = config.launch.local_rank = rank;
        config.launch.world_size = config.launch.local_world_size = world;
        config.launch.master_port = port;
        const auto dims = models::resolve_llama_dims(config);
        ampt::distributed::DataParallel dist(config, c10::Device(c10::kCPU));
        auto* exchange = dist.expert_exchange();
        if (exchange == nullptr) throw std::logic_error("no expert exchange group");
        shard[rank] = dims.expert_shard.index;
        exchange_rank[rank] = exchange->rank();
        exchange_size[rank] = exchange->size();
        // Within a group every share once; across replicas one share.
        auto seen = torch::zeros({dims.expert_shard.count});
        seen[dims.expert_shard.index] = 1;
        exchange->all_reduce(seen, "the test's all-reduce over the exchange");
        shares_seen[rank] = seen;
        auto held = torch::full({1}, static_cast<double>(dims.expert_shard.index));
        dist.expert_replicas()->all_reduce(held, "the test's all-reduce over the replicas");
        replica_shards[rank] = held;
      } catch (...) {
        errors[rank] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  for (int64_t rank = 0; rank < world; ++rank) {
    INFO("rank " << rank);
    CHECK(shard[rank] == rank % groups_of);
    CHECK(exchange_rank[rank] == shard[rank]);
    CHECK(exchange_size[rank] == groups_of);
    CHECK(torch::equal(shares_seen[rank], torch::ones({groups_of})));
    CHECK(replica_shards[rank].item<double>() == static_cast<double>(shard[rank] * (world / groups_of)));
  }
}

TEST_CASE("expert parallelism: what it cannot divide is a one-line usage error, and one process "
          "says it has nothing to divide",
          "[train][moe][dist][cli]") {
  check_refused({"--expert_parallel", "2"},
                "expert_parallel 2 divides a sparse model's experts among ranks, and model gpt has "
                "none; use expert_parallel 1",
                "gpt");
  check_refused({"--expert_parallel", "2", "--zero_stage", "2", "--mixed_precision", "bf16",
                 "--amp_opt_level", "O2"},
                "zero_stage 2 with expert_parallel 2 and amp_opt_level O2: ZeRO shards the fp32 "
                "masters of the dense weights only");
  check_refused({"--expert_parallel", "2", "--lora_rank", "4", "--lora_target_parameters",
                 "mlp.experts.down_proj"},
                "expert_parallel 2 with LoRA on the experts");
  check_refused({"--expert_parallel", "3"},
                "expert_parallel 3 does not divide model qwen3-moe's 8 experts; use a divisor of 8");
  // Alone, a process has nothing to divide: it trains, and says so.
  const auto alone = ampt::test::run_ampt({"train", "--model", "qwen3-moe", "--device", "cpu",
                                           "--max_steps", "1", "--loader_workers", "0",
                                           "--expert_parallel", "2", "--output_dir",
                                           ampt::test::make_temp_dir() + "/alone"});
  INFO(alone.out << alone.err);
  CHECK(alone.exit_code == 0);
  CHECK_THAT(alone.out + alone.err, Catch::Contains("expert_parallel 2 has nothing to divide in a "
                                                    "single process: every sparse layer keeps all "
                                                    "its experts"));
  const auto dir = ampt::test::make_temp_dir();
  const auto ranks = ampt::test::run_rank_processes(
      2, {AMPT_BINARY, "train", "--model", "qwen3-moe", "--device", "cpu", "--max_steps", "1",
          "--dist_timeout", "30", "--expert_parallel", "4", "--output_dir", dir + "/out"},
      dir + "/logs");
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << ":\n" << ranks.err[r]);
    CHECK(ranks.status[r] != 0);
    CHECK_THAT(ranks.err[r], Catch::Contains("expert_parallel 4 does not divide the world size 2"));
  }
}

// A pretrained sparse model (ampt's own Hugging Face export of a trained one, in the published
// per-expert layout) loads on 2 ranks that divide its experts: each takes its share, and the
// checkpoint they save at once (lr 1e-30 moves nothing) holds the exported weights whole.
TEST_CASE("expert parallelism: --init_from loads each rank's share of the experts and a save "
          "gathers them whole",
          "[train][moe][dist][cli][checkpoint]") {
  const auto dir = ampt::test::make_temp_dir();
  const std::vector<std::string> common{"--model", "qwen3-moe", "--device", "cpu",
                                        "--max_steps", "1", "--loader_workers", "0",
                                        "--val_fraction", "0", "--dist_timeout", "30"};
  auto args = std::vector<std::string>{"train", "--output_dir", dir + "/trained"};
  args.insert(args.end(), common.begin(), common.end());
  REQUIRE(ampt::test::run_ampt(args).exit_code == 0);
  const auto trained = ampt::checkpoint::load(dir + "/trained/ckpt-00000001.pt");
  const auto exported = ampt::test::run_ampt({"export", "--format", "hf", "--checkpoint",
                                              dir + "/trained/ckpt-00000001.pt", "--out",
                                              dir + "/hf"});
  INFO(exported.out << exported.err);
  REQUIRE(exported.exit_code == 0);

  std::vector<std::string> ranks_args{AMPT_BINARY, "train", "--output_dir", dir + "/divided",
                                      "--init_from", dir + "/hf", "--expert_parallel", "2",
                                      "--lr", "1e-30"};
  ranks_args.insert(ranks_args.end(), common.begin(), common.end());
  const auto ranks = ampt::test::run_rank_processes(2, ranks_args, dir + "/logs");
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << ":\n" << ranks.out[r] << ranks.err[r]);
    REQUIRE(ranks.status[r] == 0);
  }
  const auto divided = ampt::checkpoint::load(dir + "/divided/ckpt-00000001.pt");
  const std::map<std::string, torch::Tensor> saved(divided.model.begin(), divided.model.end());
  REQUIRE(saved.size() == trained.model.size());
  int experts = 0;
  for (const auto& [name, tensor] : trained.model) {
    INFO(name);
    REQUIRE(saved.count(name) == 1);
    CHECK(saved.at(name).sizes() == tensor.sizes());
    CHECK(torch::equal(saved.at(name), tensor));
    experts += name.find("experts.") != std::string::npos ? 1 : 0;
  }
  CHECK(experts == 4);  // gate_up_proj and down_proj of both sparse blocks
}
