// The launch scripts under the real scheduler: what reaches ampt through sbatch's environment, a
// 2-task Gloo job that finds its rank, world size and master in Slurm's own variables, a task
// that dies taking the whole job down, and torchrun started by srun.
#include "slurm/slurm_cluster.h"
#include "support/json_field.h"
#include "support/process.h"

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <sstream>

using namespace ampt::test;
using namespace ampt::test::slurm;

namespace {

const std::vector<std::string> kTwoTasks = {"--ntasks-per-node=2", "--gpus-per-node=0",
                                            "--cpus-per-task=1", "slurm/train-node.sbatch"};

// The line of `--debug`'s settings table for `name`: "batch_size   = 24   (env AMPT_BATCH_SIZE)".
std::string setting_line(const std::string& log, const std::string& name) {
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name + " ", 0) == 0) return line;
  }
  return "";
}

// The pid of the task with global rank `rank` in step 0 of `job`, as `scontrol listpids` shows it.
int task_pid(const std::string& job, int rank) {
  const auto listed = slurm::command({"scontrol", "listpids", job + ".0"});
  INFO(listed.out << listed.err);
  REQUIRE(listed.exit_code == 0);
  std::istringstream lines(listed.out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string pid, job_id, step, local_id, global_id;
    if (words >> pid >> job_id >> step >> local_id >> global_id && step == "0" &&
        global_id == std::to_string(rank)) {
      return std::stoi(pid);
    }
  }
  FAIL("no task of global rank " << rank << " in step " << job << ".0");
  return -1;
}

}  // namespace

TEST_CASE("sbatch's environment: every short override and AMPT_* variable reaches ampt",
          "[slurm]") {
  if (!slurm::cluster_up()) return;
  const slurm::SubmitDir submit;
  const auto config = submit.path() + "/small.yaml";
  write_file(config, "training:\n  warmup_steps: 1\n");
  // The settings each short name stands for (docs/slurm.md, slurm/common.sh), with values none has by
  // default.
  const std::vector<std::tuple<std::string, std::string, std::string, std::string>> expected = {
      {"PRECISION", "fp16", "mixed_precision", "AMPT_MIXED_PRECISION"},
      {"BATCH_SIZE", "24", "batch_size", "AMPT_BATCH_SIZE"},
      {"GRAD_ACCUM", "2", "grad_accum_steps", "AMPT_GRAD_ACCUM_STEPS"},
      {"MODEL", "mlp", "model", "AMPT_MODEL"},
      {"DATASET", "synthetic", "dataset", "AMPT_DATASET"},
      {"MAX_STEPS", "2", "max_steps", "AMPT_MAX_STEPS"},
      {"EPOCHS", "5", "epochs", "AMPT_EPOCHS"},
      {"LR", "0.002", "lr", "AMPT_LR"},
      {"CONFIG", config, "config", "AMPT_CONFIG"},
      {"SEED", "7", "seed", "AMPT_SEED"},
      {"DIST_BACKEND", "gloo", "dist_backend", "AMPT_DIST_BACKEND"}};
  std::map<std::string, std::string> env = {
      {"AMPT_MLP_HIDDEN", "24"}, {"AMPT_SYNTHETIC_SAMPLES", "512"}, {"AMPT_DEBUG", "true"}};
  for (const auto& [short_name, value, setting, variable] : expected) env[short_name] = value;

  const auto job = submit.sbatch(
      joined({"--gpus-per-task=0", "--cpus-per-task=1", "slurm/train.sbatch"}, kTrainFlags), env);
  const auto fields = slurm::wait_for_end(job, 60);
  const auto log = submit.log(job);
  INFO(log);
  REQUIRE(fields.at("JobState") == "COMPLETED");
  for (const auto& [short_name, value, setting, variable] : expected) {
    const auto line = setting_line(log, setting);
    INFO(short_name << " → " << line);
    CHECK_THAT(line,
               Catch::Contains("= " + value + " ") && Catch::EndsWith("(env " + variable + ")"));
  }
  CHECK_THAT(setting_line(log, "mlp_hidden"), Catch::EndsWith("(env AMPT_MLP_HIDDEN)"));
  CHECK_THAT(setting_line(log, "warmup_steps"), Catch::Contains("= 1 "));
  CHECK_THAT(log, Catch::Contains("hidden 24 x 3 layers"));
  CHECK_THAT(log, Catch::Contains("Batch 24 x 2 accumulation = 48 samples/step; 2 steps"));
  CHECK_THAT(log, Catch::Contains("step 2/2 |"));
}

TEST_CASE("a 2-task job trains on Gloo with its rank, world size and master from Slurm's variables",
          "[slurm]") {
  if (!slurm::cluster_up()) return;
  const slurm::SubmitDir submit;
  const auto job = submit.sbatch(
      joined(kTwoTasks, kTrainFlags),
      {{"DIST_BACKEND", "gloo"}, {"PRECISION", "no"}, {"BATCH_SIZE", "16"}, {"MAX_STEPS", "20"}});
  const auto fields = slurm::wait_for_end(job, 60);
  const auto log = submit.log(job);
  INFO(log);
  REQUIRE(fields.at("JobState") == "COMPLETED");
  // Rank 0 alone logs; the port is 15000 + job id mod 20000.
  const auto dist_lines = lines_with(log, "[DIST]");
  REQUIRE(dist_lines.size() == 1);
  CHECK(dist_lines[0] ==
        fmt::format("[DIST] 2 ranks, gloo backend; this is srun rank 0 of 2 (local 0 of 2, node "
                    "0), master {}:{}; global batch 32 = 2 ranks x 16 x 1 accumulation",
                    fields.at("NodeList"), 15000 + std::stoll(job) % 20000));

  // The tasks took their slices of each global batch: one process with batch 32 ends the same.
  const auto single_dir = submit.path() + "/single";
  const auto single = run_ampt(joined({"train", "--output_dir", single_dir, "--mixed_precision",
                                       "no", "--batch_size", "32", "--max_steps", "20"},
                                      kTrainFlags),
                               {{"OMP_NUM_THREADS", "1"}});
  INFO(single.err);
  REQUIRE(single.exit_code == 0);
  CHECK(final_val_loss(submit.output_dir(job)) == Approx(final_val_loss(single_dir)).epsilon(1e-5));
}

TEST_CASE("a task killed mid-run ends the whole job (srun --kill-on-bad-exit), the lost rank named",
          "[slurm]") {
  if (!slurm::cluster_up()) return;
  const slurm::SubmitDir submit;
  // dist_timeout 4: the survivor names a rank silent for 2 s, well within Slurm's KillWait (10 s).
  const auto job = submit.sbatch(joined(kTwoTasks, joined(kTrainFlags, {"--dist_timeout", "4"})),
                                 {{"DIST_BACKEND", "gloo"}, {"MAX_STEPS", "1000000"}});
  REQUIRE(submit.wait_for_training(job));
  REQUIRE(::kill(task_pid(job, 1), SIGKILL) == 0);
  const auto killed_at = std::chrono::steady_clock::now();
  const auto fields = slurm::wait_for_end(job, 60);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  const auto log = submit.log(job);
  INFO(log);
  REQUIRE(fields.at("JobState") == "FAILED");
  const auto& host = fields.at("NodeList");
  // srun names the task that died and ends the step: rank 0 gets Slurm's SIGTERM.
  CHECK_THAT(log, Catch::Contains(fmt::format("srun: error: {}: task 1: Killed", host)));
  CHECK_THAT(log, Catch::Contains(fmt::format("Terminating StepId={}.0", job)));
  CHECK_THAT(log, Catch::Contains("ampt: stop requested"));
  // Rank 0 names the lost rank and exits before Slurm's SIGKILL would come.
  CHECK_THAT(log, Catch::Contains("ampt: error: rank 0: lost rank 1"));
  CHECK_THAT(
      log, Catch::Contains(fmt::format("srun: error: {}: task 0: Exited with exit code 1", host)));
  CHECK(seconds < 10.0);
}

TEST_CASE("slurm/torchrun.sh in a Slurm job: torchrun starts 2 ranks on the job's node",
          "[slurm]") {
  if (!slurm::cluster_up()) return;
  const slurm::SubmitDir submit;
  // torchrun comes with the project's PyTorch.
  const auto torch_bin = std::filesystem::path(AMPT_PYTHON).parent_path().string();
  const auto job = submit.sbatch(
      {"--ntasks=1", "--cpus-per-task=2", "--output=ampt-%j.out", "--wrap",
       "srun slurm/torchrun.sh 2 --device cpu --loader_workers 0 --max_steps 5 --output_dir "
       "runs/torchrun"},
      {{"PATH", torch_bin + ":" + std::getenv("PATH")}});
  const auto fields = slurm::wait_for_end(job, 120);
  const auto log = submit.log(job);
  INFO(log);
  REQUIRE(fields.at("JobState") == "COMPLETED");
  CHECK_THAT(log, Catch::Contains("[DIST] 2 ranks, gloo backend; this is torchrun rank 0 of 2 "
                                  "(local 0 of 2, node 0)"));
  CHECK_THAT(log, Catch::Contains("step 5/5 |"));
  CHECK(std::filesystem::exists(submit.path() + "/runs/torchrun/ckpt-00000005.pt"));
}
