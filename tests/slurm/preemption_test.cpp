// Preemption under the real scheduler: Slurm's --signal before the time limit (save, exit 75,
// the job requeues itself, the requeued job resumes) and scancel's SIGTERM before its SIGKILL,
// each against a run never interrupted.
#include "slurm/slurm_cluster.h"
#include "support/json_field.h"
#include "support/process.h"

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <optional>
#include <regex>

using namespace ampt::test;
using namespace ampt::test::slurm;

namespace {

// 1500 steps of the default mlp (a few seconds): long enough to be caught mid-run.
constexpr const char* kSteps = "1500";

// In fp32 (no), not auto: auto picks bf16 from /proc/cpuinfo even where ATEN_CPU_CAPABILITY=avx2
// emulates it, and a resumed job finishes inside its one-minute limit only at fp32's speed on
// every CPU. A function: kTrainFlags, in another file, may not be initialised before this one's
// globals.
std::vector<std::string> fp32_train_flags() {
  return joined(kTrainFlags, {"--mixed_precision", "no"});
}

std::string with_logs(const std::string& dir) {
  std::filesystem::create_directories(dir + "/logs");
  return dir;
}

// ampt on its own in the submit directory's reference/, never interrupted, with the settings the
// jobs get (MAX_STEPS=kSteps); it runs while the job does.
class Uninterrupted {
 public:
  explicit Uninterrupted(const SubmitDir& submit)
      : dir_(with_logs(submit.path() + "/reference")),
        run_(joined({AMPT_BINARY, "train", "--output_dir", dir_, "--max_steps", kSteps},
                    fp32_train_flags()),
             dir_ + "/logs", {{"OMP_NUM_THREADS", "1"}}) {}

  // Waits for the run to end.
  double final_val_loss() {
    INFO(run_.err());
    REQUIRE(run_.wait() == 0);
    return slurm::final_val_loss(dir_);
  }

 private:
  std::string dir_;
  Child run_;
};

}  // namespace

TEST_CASE(
    "Slurm's --signal before the time limit: ampt saves, the job requeues itself and resumes "
    "to the result of a run never stopped",
    "[slurm]") {
  if (!slurm::cluster_up()) return;
  const slurm::SubmitDir submit;
  Uninterrupted reference(submit);

  // The warning falls due 5 s into the one-minute limit (60 - 25 - the 30 s slurmctld may send it
  // early). slurmctld checks time limits every 30 s, so the job is paused (SIGSTOP, through Slurm)
  // until the check, which sends SIGCONT and then SIGUSR1.
  const auto job = submit.sbatch(joined({"--gpus-per-task=0", "--cpus-per-task=1", "--time=1",
                                         "--signal=USR1@25", "slurm/train.sbatch"},
                                        fp32_train_flags()),
                                 {{"MAX_STEPS", kSteps}});
  REQUIRE(submit.wait_for_training(job));
  // Fails harmlessly when the check has already come and the job waits, requeued.
  slurm::command({"scancel", "--signal=STOP", job});

  // A requeued job waits two minutes for its begin time: release it each time, though not within
  // the second its last run ended (slurmd refuses a job credential as old as its revocation).
  int releases = 0;
  std::optional<std::chrono::steady_clock::time_point> requeued;
  const auto fields = slurm::wait_for_end(job, 120, [&](const slurm::JobFields& now) {
    if (now.at("JobState") != "PENDING" || now.at("Reason") != "BeginTime") return;
    if (!requeued) requeued = std::chrono::steady_clock::now();
    if (std::chrono::steady_clock::now() - *requeued < std::chrono::seconds(2)) return;
    const auto released = slurm::command({"scontrol", "update", "JobId=" + job, "StartTime=now"});
    INFO(released.out << released.err);
    CHECK(released.exit_code == 0);
    requeued.reset();
    ++releases;
  });
  const auto log = submit.log(job);
  INFO(log);
  REQUIRE(fields.at("JobState") == "COMPLETED");
  CHECK(releases >= 1);
  CHECK(fields.at("Restarts") == std::to_string(releases));
  CHECK_THAT(log, Catch::Contains("[CKPT] Stopped by SIGUSR1 after step"));
  CHECK_THAT(log, Catch::Contains(
                      "ampt saved a checkpoint after a preemption signal: requeueing job " + job));
  CHECK_THAT(log, Catch::Contains("[CKPT] Resumed from runs/slurm-" + job + "/ckpt-"));
  CHECK(json_field(read_file(submit.output_dir(job) + "/summary.json"), "steps") == 1500);

  CHECK(final_val_loss(submit.output_dir(job)) == reference.final_val_loss());
}

TEST_CASE(
    "scancel: ampt saves on Slurm's SIGTERM before the SIGKILL, and a new job resumes from "
    "that checkpoint to the result of a run never stopped",
    "[slurm]") {
  if (!slurm::cluster_up()) return;
  const slurm::SubmitDir submit;
  Uninterrupted reference(submit);
  const std::vector<std::string> sbatch_args =
      joined({"--gpus-per-task=0", "--cpus-per-task=1", "slurm/train.sbatch"},
             fp32_train_flags());

  const auto job = submit.sbatch(sbatch_args, {{"MAX_STEPS", kSteps}});
  REQUIRE(submit.wait_for_training(job));
  const auto cancelled = slurm::command({"scancel", job});
  REQUIRE(cancelled.exit_code == 0);
  const auto fields = slurm::wait_for_end(job, 60);
  const auto log = submit.log(job);
  INFO(log);
  // Cancelled for good: the job script, signalled too, does not requeue it.
  REQUIRE(fields.at("JobState") == "CANCELLED");
  CHECK(fields.at("Restarts") == "0");
  std::smatch stopped;
  REQUIRE(std::regex_search(log, stopped,
                            std::regex(R"(\[CKPT\] Stopped by SIGTERM after step (\d+))")));
  const int step = std::stoi(stopped[1]);
  const auto checkpoint = fmt::format("{}/ckpt-{:08d}.pt", submit.output_dir(job), step);
  CHECK(std::filesystem::exists(checkpoint));

  // A later flag wins over the script's own --output_dir: the new job continues the old one.
  const auto resumed = submit.sbatch(joined(sbatch_args, {"--output_dir", submit.output_dir(job)}),
                                     {{"MAX_STEPS", kSteps}});
  const auto resumed_fields = slurm::wait_for_end(resumed, 120);
  const auto resumed_log = submit.log(resumed);
  INFO(resumed_log);
  REQUIRE(resumed_fields.at("JobState") == "COMPLETED");
  CHECK_THAT(resumed_log,
             Catch::Contains(fmt::format("[CKPT] Resumed from {} at step {}", checkpoint, step)));

  CHECK(final_val_loss(submit.output_dir(job)) == reference.final_val_loss());
}
