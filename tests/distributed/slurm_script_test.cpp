// What a one-node Slurm cannot show: a job across several nodes. A stand-in `srun` starts the
// tasks of a 2-node job on this machine, with the variables real srun gives each task on its
// node, and the test sets the job's own (a bracketed host list whose first host is this
// machine). Everything a single node shows runs under a real Slurm in tests/slurm/.
#include "support/process.h"

#include <arpa/inet.h>
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>

using namespace ampt::test;

namespace {

// Starts SLURM_NTASKS copies of the command after srun's options, numbered as srun numbers the
// tasks of SLURM_NNODES nodes.
constexpr const char* kFakeSrun = R"(#!/bin/bash
while [[ "${1:-}" == -* ]]; do shift; done
per_node=$((SLURM_NTASKS / SLURM_NNODES))
pids=()
for ((i = 0; i < SLURM_NTASKS; i++)); do
  SLURM_PROCID=$i SLURM_LOCALID=$((i % per_node)) SLURM_NODEID=$((i / per_node)) \
    "$@" > "$TASK_LOGS/task$i.out" 2> "$TASK_LOGS/task$i.err" &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do
  wait "$pid" || { code=$?; [ "$code" -gt "$status" ] && status=$code; }
done
exit "$status"
)";

}  // namespace

TEST_CASE("the multi-node sbatch script trains one task on each of 2 nodes, rank 0 on the first "
          "host",
          "[dist][slurm][cli]") {
  const auto dir = make_temp_dir();
  write_file(dir + "/bin/srun", kFakeSrun);
  std::filesystem::permissions(dir + "/bin/srun", std::filesystem::perms::owner_all);
  std::filesystem::create_directories(dir + "/logs");
  // The job id decides the rendezvous port (15000 + id mod 20000): pick one from the pid.
  const int job_id = 10000 + ::getpid() % 9000;
  const std::map<std::string, std::string> env = {
      {"PATH", fmt::format("{}/bin:{}", dir, std::getenv("PATH"))},
      {"TASK_LOGS", dir + "/logs"},
      {"SLURM_SUBMIT_DIR", dir},
      {"SLURM_JOB_ID", std::to_string(job_id)},
      {"SLURM_NNODES", "2"},
      {"SLURM_NTASKS", "2"},
      {"SLURM_TASKS_PER_NODE", "1(x2)"},
      {"SLURM_JOB_NODELIST", "127.0.0.[1-2]"},
      {"AMPT_EXE", AMPT_BINARY},
      {"BATCH_SIZE", "16"},
      {"MAX_STEPS", "3"},
      {"AMPT_SYNTHETIC_SAMPLES", "512"},
      {"AMPT_MLP_HIDDEN", "16"},
      {"OMP_NUM_THREADS", "1"}};
  // The scripts run from the submit directory, where the repository's slurm/ folder lives.
  std::filesystem::create_directory_symlink(std::filesystem::path(AMPT_SOURCE_DIR) / "slurm",
                                            dir + "/slurm");
  const auto out_dir = dir + "/runs/slurm-" + std::to_string(job_id);
  const auto result = run_process(
      {"/bin/bash", dir + "/slurm/train-multinode.sbatch", "--loader_workers", "0",
       "--eval_batches", "1", "--dist_timeout", "60"},
      env);
  const auto rank0 = read_file(dir + "/logs/task0.out");
  INFO(result.out << result.err << rank0 << read_file(dir + "/logs/task0.err")
                  << read_file(dir + "/logs/task1.err"));
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(rank0, Catch::Contains(fmt::format(
                        "[DIST] 2 ranks, gloo backend; this is srun rank 0 of 2 (local 0 of 1, "
                        "node 0), master 127.0.0.1:{}",
                        15000 + job_id % 20000)));
  CHECK_THAT(rank0, Catch::Contains("global batch 32 = 2 ranks x 16 x 1 accumulation"));
  CHECK_THAT(rank0, Catch::Contains("step 3/3 |"));
  CHECK(read_file(dir + "/logs/task1.out").empty());
  CHECK(std::filesystem::exists(out_dir + "/metrics.jsonl"));
  CHECK(std::filesystem::exists(out_dir + "/ckpt-00000003.pt"));
}
