// Where this process sits in a distributed job, read from the launcher's environment (torchrun or
// Slurm's srun) as a pure function of that environment, so it can be tested without launching.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace ampt::config {

enum class Launcher { none, torchrun, slurm };

struct Launch {
  Launcher launcher = Launcher::none;
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t local_rank = 0;        // picks the GPU on a node
  int64_t local_world_size = 1;  // ranks on this node
  int64_t node_rank = 0;
  std::string master_addr = "127.0.0.1";  // host of rank 0, which serves the rendezvous store
  int64_t master_port = 29500;
  std::string gloo_interface;  // GLOO_SOCKET_IFNAME: the network interface Gloo binds to

  bool distributed() const { return world_size > 1; }
  bool is_main() const { return rank == 0; }
  // "torchrun rank 1 of 4 (local 1 of 2, node 0), master node01:29500"; "single process".
  std::string describe() const;
};

// Expert parallelism's layout: on `world_size` > 1 ranks, groups of `expert_parallel`
// consecutive ranks, so it must divide world_size. UsageError, one line.
void check_expert_groups(int64_t expert_parallel, int64_t world_size);

// One rank's place in that layout, the one rule the model (which experts it builds) and the
// process groups (whom it exchanges tokens with) both follow: each group of `count` consecutive
// ranks divides every sparse layer's experts among its members in rank order.
struct ExpertLayout {
  int64_t shard = 0;  // this rank's place in its group: it holds the shard-th share of the experts
  int64_t count = 1;  // the ranks the experts are divided among (1: this rank holds them all)
  int64_t group = 0;  // which group of consecutive ranks
  std::vector<int64_t> exchange;  // the group's ranks, in order: exchange[shard] is this rank
  std::vector<int64_t> replicas;  // the ranks, one per group, holding the same experts as this one
};

// `launch`'s rank's layout under config.expert_parallel `expert_parallel`. Only a distributed
// run divides the experts: a single process (ampt export, generate) has count 1. Throws
// check_expert_groups' UsageError.
ExpertLayout expert_layout(int64_t expert_parallel, const Launch& launch);

// torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT)
// win when RANK or WORLD_SIZE is set; else Slurm's (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
// SLURM_NODEID, SLURM_TASKS_PER_NODE, MASTER_ADDR or else the first host of SLURM_JOB_NODELIST,
// MASTER_PORT or else a port derived from SLURM_JOB_ID) when SLURM_PROCID is set; else a single process. Throws
// UsageError (one line naming the variable, its value and what is allowed) for a half-set or
// inconsistent environment.
Launch parse_launch(const std::map<std::string, std::string>& env);

// Expands a Slurm host list: "node[01-03,07],gpu-a1" → node01 node02 node03 node07 gpu-a1;
// several bracket groups in one name multiply ("r[1-2]n[1-2]" → r1n1 r1n2 r2n1 r2n2). Throws
// UsageError naming `variable` for a malformed list.
std::vector<std::string> expand_nodelist(std::string_view list,
                                         std::string_view variable = "SLURM_JOB_NODELIST");

// The rendezvous port a Slurm job uses without MASTER_PORT: in [15000, 35000), the same for every
// task of the job and different for jobs with nearby ids.
int64_t slurm_port(int64_t job_id);

}  // namespace ampt::config
