// The one-node Slurm cluster that tests/slurm/cluster.sh starts for these tests (CTest's
// slurm_cluster fixture): jobs submitted with the real sbatch from a user's checkout, their state
// as scontrol reports it, and the commands that act on them.
#pragma once

#include "support/process.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace ampt::test::slurm {

// True when the fixture's cluster runs. Otherwise notes the skip (support/skip.h) with the
// reason tests/slurm/cluster.sh gave, and the test returns at once.
bool cluster_up();

// Runs a Slurm client command (scontrol, scancel ...) against the cluster.
ProcessResult command(const std::vector<std::string>& argv);

// `scontrol show job` of one job, field by field: JobState, Reason, Restarts, ExitCode, NodeList
// ...
using JobFields = std::map<std::string, std::string>;
JobFields job_fields(const std::string& job);

// Polls the job's fields until it has ended (COMPLETED, FAILED, CANCELLED ...) or `seconds` have
// passed, and hands each poll's fields to `each`; the last fields.
JobFields wait_for_end(const std::string& job, double seconds,
                       const std::function<void(const JobFields&)>& each = {});

// The `ampt train` flags of the tests' small jobs: CPU, batches gathered on the training thread,
// a metrics line every 10 steps.
extern const std::vector<std::string> kTrainFlags;

std::vector<std::string> joined(std::vector<std::string> head,
                                const std::vector<std::string>& tail);

// summary.json's final_val_loss of the run in `output_dir`.
double final_val_loss(const std::string& output_dir);

// A fresh directory with the repository's slurm/ folder in it, as a checkout has it, from which
// jobs are submitted: they run there, write ampt-<job>.out and runs/slurm-<job>.
class SubmitDir {
 public:
  SubmitDir();

  // `sbatch ARGS` with the environment of a user who set `env`, AMPT_EXE (this build's ampt) and
  // one OpenMP thread per task; the job id.
  std::string sbatch(const std::vector<std::string>& args,
                     const std::map<std::string, std::string>& env) const;

  const std::string& path() const { return path_; }
  std::string log(const std::string& job) const;
  std::string output_dir(const std::string& job) const;
  // True once the job's ampt has written its first metrics line (within 60 s).
  bool wait_for_training(const std::string& job) const;

 private:
  std::string path_;
};

}  // namespace ampt::test::slurm
