#include <catch2/catch.hpp>

#include "config_test_support.h"

#include "ampt/config/launch.h"

#include <algorithm>
#include <utility>
#include <vector>

using namespace ampt::config;
using namespace ampt::config::testing;

namespace {

std::string launch_error(const Env& env) {
  return usage_error([&] { parse_launch(env); });
}

Env torchrun(int rank, int world) {
  return {{"RANK", std::to_string(rank)},        {"WORLD_SIZE", std::to_string(world)},
          {"LOCAL_RANK", std::to_string(rank)},  {"LOCAL_WORLD_SIZE", std::to_string(world)},
          {"MASTER_ADDR", "10.0.0.5"},           {"MASTER_PORT", "29400"}};
}

Env srun(int rank, int world) {
  return {{"SLURM_PROCID", std::to_string(rank)},
          {"SLURM_NTASKS", std::to_string(world)},
          {"SLURM_LOCALID", std::to_string(rank % 4)},
          {"SLURM_NODEID", std::to_string(rank / 4)},
          {"SLURM_TASKS_PER_NODE", "4(x2)"},
          {"SLURM_JOB_NODELIST", "gpu[07-08]"},
          {"SLURM_JOB_ID", "123456"}};
}

}  // namespace

TEST_CASE("no launcher variables: a single process", "[config][launch]") {
  const Launch launch = parse_launch({{"HOME", "/root"}, {"SLURM_JOB_ID", "5"}});
  CHECK(launch.launcher == Launcher::none);
  CHECK_FALSE(launch.distributed());
  CHECK(launch.rank == 0);
  CHECK(launch.world_size == 1);
  CHECK(launch.describe() == "single process");
}

TEST_CASE("torchrun variables", "[config][launch]") {
  const Launch launch = parse_launch(torchrun(3, 4));
  CHECK(launch.launcher == Launcher::torchrun);
  CHECK(launch.rank == 3);
  CHECK(launch.world_size == 4);
  CHECK(launch.local_rank == 3);
  CHECK(launch.local_world_size == 4);
  CHECK(launch.master_addr == "10.0.0.5");
  CHECK(launch.master_port == 29400);
  CHECK(launch.describe() == "torchrun rank 3 of 4 (local 3 of 4, node 0), master 10.0.0.5:29400");

  Env two_nodes = torchrun(5, 8);
  two_nodes["LOCAL_RANK"] = "1";
  two_nodes["LOCAL_WORLD_SIZE"] = "4";
  const Launch second = parse_launch(two_nodes);
  CHECK(second.local_rank == 1);
  CHECK(second.node_rank == 1);
}

TEST_CASE("torchrun without LOCAL_ variables puts every rank on this node", "[config][launch]") {
  Env env = torchrun(1, 2);
  env.erase("LOCAL_RANK");
  env.erase("LOCAL_WORLD_SIZE");
  const Launch launch = parse_launch(env);
  CHECK(launch.local_rank == 1);
  CHECK(launch.local_world_size == 2);
}

TEST_CASE("torchrun variables win over Slurm's (torchrun inside an allocation)",
          "[config][launch]") {
  Env env = srun(6, 8);
  env.merge(torchrun(1, 2));
  const Launch launch = parse_launch(env);
  CHECK(launch.launcher == Launcher::torchrun);
  CHECK(launch.rank == 1);
  CHECK(launch.world_size == 2);
}

TEST_CASE("half-set torchrun environments are usage errors", "[config][launch]") {
  const std::string hint =
      "torchrun sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT; set all of them or none";
  CHECK(launch_error({{"RANK", "0"}}) == "RANK is set but WORLD_SIZE is not: " + hint);
  CHECK(launch_error({{"WORLD_SIZE", "2"}}) == "WORLD_SIZE is set but RANK is not: " + hint);
  Env no_addr = torchrun(0, 2);
  no_addr.erase("MASTER_ADDR");
  CHECK(launch_error(no_addr) == "WORLD_SIZE=2 is set but MASTER_ADDR is not: " + hint);
  Env no_port = torchrun(0, 2);
  no_port.erase("MASTER_PORT");
  CHECK(launch_error(no_port) == "WORLD_SIZE=2 is set but MASTER_PORT is not: " + hint);
  // One process needs no rendezvous.
  CHECK_FALSE(parse_launch({{"RANK", "0"}, {"WORLD_SIZE", "1"}}).distributed());
}

TEST_CASE("bad torchrun values are usage errors", "[config][launch]") {
  Env env = torchrun(0, 2);
  env["RANK"] = "2";
  CHECK(launch_error(env) ==
        "invalid value '2' for RANK (environment): expected an integer in [0, 1] (WORLD_SIZE is 2)");
  env = torchrun(0, 2);
  env["WORLD_SIZE"] = "two";
  CHECK(launch_error(env) ==
        "invalid value 'two' for WORLD_SIZE (environment): expected an integer in [1, 2147483647]");
  env = torchrun(0, 2);
  env["MASTER_PORT"] = "70000";
  CHECK(launch_error(env) ==
        "invalid value '70000' for MASTER_PORT (environment): expected an integer in [1, 65535]");
  env = torchrun(1, 2);
  env["LOCAL_WORLD_SIZE"] = "1";
  CHECK(launch_error(env) == "invalid value '1' for LOCAL_RANK (environment): expected an "
                             "integer in [0, 0] (LOCAL_WORLD_SIZE is 1)");
  env = torchrun(0, 2);
  env["MASTER_ADDR"] = "";
  CHECK(launch_error(env) == "invalid value '' for MASTER_ADDR (environment): expected the host "
                             "name or address of rank 0");
}

TEST_CASE("srun variables: master from the node list, port from the job id", "[config][launch]") {
  const Launch launch = parse_launch(srun(5, 8));
  CHECK(launch.launcher == Launcher::slurm);
  CHECK(launch.rank == 5);
  CHECK(launch.world_size == 8);
  CHECK(launch.local_rank == 1);
  CHECK(launch.local_world_size == 4);
  CHECK(launch.node_rank == 1);
  CHECK(launch.master_addr == "gpu07");
  CHECK(launch.master_port == slurm_port(123456));
  CHECK(launch.master_port == 15000 + 123456 % 20000);
  CHECK(launch.describe() == "srun rank 5 of 8 (local 1 of 4, node 1), master gpu07:18456");

  Env overridden = srun(5, 8);
  overridden["MASTER_PORT"] = "29555";
  overridden["MASTER_ADDR"] = "head";
  const Launch explicit_master = parse_launch(overridden);
  CHECK(explicit_master.master_port == 29555);
  CHECK(explicit_master.master_addr == "head");
}

TEST_CASE("uneven SLURM_TASKS_PER_NODE gives each node its own count", "[config][launch]") {
  Env env = srun(4, 5);
  env["SLURM_TASKS_PER_NODE"] = "2(x2),1";
  env["SLURM_NODEID"] = "2";
  env["SLURM_LOCALID"] = "0";
  CHECK(parse_launch(env).local_world_size == 1);
  env["SLURM_TASKS_PER_NODE"] = "2(x2";
  CHECK(launch_error(env) == "invalid value '2(x2' for SLURM_TASKS_PER_NODE (environment): "
                             "expected counts like '4(x2),1' covering SLURM_NODEID 2");
}

TEST_CASE("half-set Slurm environments are usage errors", "[config][launch]") {
  const std::string hint = "srun sets SLURM_PROCID, SLURM_NTASKS and SLURM_LOCALID for every "
                           "task; launch ampt with srun inside the job";
  CHECK(launch_error({{"SLURM_PROCID", "0"}}) == "SLURM_PROCID is set but SLURM_NTASKS is not: " +
                                                     hint);
  Env env = srun(1, 2);
  env.erase("SLURM_LOCALID");
  CHECK(launch_error(env) == "SLURM_NTASKS=2 is set but SLURM_LOCALID is not: " + hint);
  env = srun(1, 2);
  env.erase("SLURM_JOB_NODELIST");
  CHECK(launch_error(env) == "SLURM_NTASKS=2 is set but SLURM_JOB_NODELIST is not: the master "
                             "host is its first entry (or set MASTER_ADDR)");
  env["SLURM_NODELIST"] = "n[3-4]";
  CHECK(parse_launch(env).master_addr == "n3");
  env = srun(1, 2);
  env.erase("SLURM_JOB_ID");
  CHECK(launch_error(env) == "SLURM_NTASKS=2 is set but SLURM_JOB_ID is not: the rendezvous "
                             "port is derived from it (or set MASTER_PORT)");
  env = srun(2, 2);
  CHECK(launch_error(env) == "invalid value '2' for SLURM_PROCID (environment): expected an "
                             "integer in [0, 1] (SLURM_NTASKS is 2)");
}

TEST_CASE("Slurm node lists expand like scontrol show hostnames", "[config][launch]") {
  using V = std::vector<std::string>;
  CHECK(expand_nodelist("node01") == V{"node01"});
  CHECK(expand_nodelist("node[01-04,07]") ==
        V{"node01", "node02", "node03", "node04", "node07"});
  CHECK(expand_nodelist("gpu[8-10],login1") == V{"gpu8", "gpu9", "gpu10", "login1"});
  CHECK(expand_nodelist("n[098-101]") == V{"n098", "n099", "n100", "n101"});
  CHECK(expand_nodelist("r[1-2]-n[1,3]") == V{"r1-n1", "r1-n3", "r2-n1", "r2-n3"});
  CHECK(expand_nodelist("a[1-2],b[5],c") == V{"a1", "a2", "b5", "c"});
}

TEST_CASE("malformed node lists are usage errors", "[config][launch]") {
  const std::string tail = "; expected host names with ranges like node[01-04,07]";
  CHECK(usage_error([] { expand_nodelist("node[01-04"); }) ==
        "invalid value 'node[01-04' for SLURM_JOB_NODELIST (environment): '[' without ']'" + tail);
  CHECK(usage_error([] { expand_nodelist("node[4-1]"); }) ==
        "invalid value 'node[4-1]' for SLURM_JOB_NODELIST (environment): bad range '4-1'" + tail);
  CHECK(usage_error([] { expand_nodelist("node[a-b]"); }) ==
        "invalid value 'node[a-b]' for SLURM_JOB_NODELIST (environment): bad range 'a-b'" + tail);
  CHECK(usage_error([] { expand_nodelist("node[]"); }) ==
        "invalid value 'node[]' for SLURM_JOB_NODELIST (environment): empty brackets" + tail);
  CHECK(usage_error([] { expand_nodelist("a,,b"); }) ==
        "invalid value 'a,,b' for SLURM_JOB_NODELIST (environment): an empty host name; expected "
        "host names with ranges like node[01-04,07]");
  CHECK(usage_error([] { expand_nodelist("n1]"); }) ==
        "invalid value 'n1]' for SLURM_JOB_NODELIST (environment): ']' without '['" + tail);
}

TEST_CASE("the launch is resolved with the configuration", "[config][launch]") {
  const Resolved resolved = resolve({"--dist_timeout", "30"}, torchrun(1, 2));
  CHECK(resolved.config().launch.rank == 1);
  CHECK(resolved.config().dist_timeout == 30);
  CHECK(resolve_error({}, {{"RANK", "x"}, {"WORLD_SIZE", "2"}}) ==
        "invalid value 'x' for RANK (environment): expected an integer in [0, 1] (WORLD_SIZE is 2)");
}

TEST_CASE("dist options come from the dist section, env and flags", "[config][launch]") {
  TempYaml yaml("dist:\n  backend: gloo\n  timeout: 45\n  reduce_dtype: bf16\n  zero_stage: 2\n");
  const Config config = resolve_yaml(yaml).config();
  CHECK(config.dist_backend == DistBackend::gloo);
  CHECK(config.dist_timeout == 45);
  CHECK(config.reduce_dtype == ReduceDtype::bf16);
  CHECK(config.zero_stage == 2);
  CHECK(resolve({}, {{"AMPT_REDUCE_DTYPE", "fp32"}}).config().reduce_dtype == ReduceDtype::fp32);
  CHECK(resolve({"--zero_stage", "1"}, {}).config().zero_stage == 1);
  CHECK(resolve({"--zero_stage", "3", "--param_dtype", "bf16"}, {}).config().param_dtype ==
        ParamDtype::bf16);
  CHECK(resolve({}, {{"AMPT_PARAM_DTYPE", "fp32"}}).config().param_dtype == ParamDtype::fp32);
  CHECK(resolve_error({"--zero_stage", "4"}) ==
        "invalid value '4' for zero_stage (flag --zero_stage): expected an integer in [0, 3]");
  CHECK(resolve_error({"--param_dtype", "fp64"}) ==
        "invalid value 'fp64' for param_dtype (flag --param_dtype): expected one of auto, fp32, "
        "bf16, fp16");
  CHECK(resolve_error({"--dist_backend", "mpi"}) ==
        "invalid value 'mpi' for dist_backend (flag --dist_backend): expected one of auto, nccl, "
        "gloo");
  CHECK(resolve_error({"--dist_timeout", "0"}) ==
        "invalid value '0' for dist_timeout (flag --dist_timeout): expected an integer >= 1");
}

TEST_CASE("expert layout: groups of consecutive ranks divide the experts, each rank's shard its "
          "place in its group, the replicas one rank of each group",
          "[config][launch][moe]") {
  // By hand: rank 4 of 6 with expert_parallel 3 is the second of ranks 3-5, and holds what rank 1
  // holds.
  const auto four = expert_layout(3, parse_launch(torchrun(4, 6)));
  CHECK(four.shard == 1);
  CHECK(four.count == 3);
  CHECK(four.group == 1);
  CHECK(four.exchange == std::vector<int64_t>{3, 4, 5});
  CHECK(four.replicas == std::vector<int64_t>{1, 4});
  for (const auto& [world, experts] : std::vector<std::pair<int, int64_t>>{
           {2, 2}, {4, 2}, {4, 4}, {6, 3}, {8, 2}, {8, 4}, {4, 1}}) {
    for (int rank = 0; rank < world; ++rank) {
      INFO("rank " << rank << " of " << world << ", expert_parallel " << experts);
      const auto layout = expert_layout(experts, parse_launch(torchrun(rank, world)));
      CHECK(layout.count == experts);
      REQUIRE(static_cast<int64_t>(layout.exchange.size()) == experts);
      CHECK(layout.exchange[static_cast<size_t>(layout.shard)] == rank);
      CHECK(static_cast<int64_t>(layout.replicas.size()) == world / experts);
      // Every replica holds this rank's share, each in its own group, this one among them.
      int64_t groups_seen = 0;
      for (const int64_t r : layout.replicas) {
        const auto other = expert_layout(experts, parse_launch(torchrun(static_cast<int>(r), world)));
        CHECK(other.shard == layout.shard);
        CHECK(other.group == groups_seen++);
      }
      CHECK(std::count(layout.replicas.begin(), layout.replicas.end(), rank) == 1);
    }
  }
  // One process divides nothing, whatever expert_parallel asks.
  const auto alone = expert_layout(4, parse_launch({}));
  CHECK(alone.count == 1);
  CHECK(alone.shard == 0);
  CHECK(alone.exchange == std::vector<int64_t>{0});
  CHECK(usage_error([] { expert_layout(4, parse_launch(torchrun(0, 6))); }) ==
        "expert_parallel 4 does not divide the world size 6: each group of 4 consecutive ranks "
        "divides the experts; use a divisor of 6");
}
