#include "slurm/slurm_cluster.h"

#include "support/json_field.h"
#include "support/process.h"
#include "support/skip.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <set>
#include <sstream>
#include <thread>

namespace ampt::test::slurm {
namespace {

std::string conf() { return std::string(AMPT_SLURM_DIR) + "/slurm.conf"; }

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace

const std::vector<std::string> kTrainFlags = {"--device", "cpu",         "--loader_workers",
                                              "0",        "--log_every", "10"};

std::vector<std::string> joined(std::vector<std::string> head,
                                const std::vector<std::string>& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

double final_val_loss(const std::string& output_dir) {
  return json_field(read_file(output_dir + "/summary.json"), "final_val_loss");
}

bool cluster_up() {
  const std::string dir = AMPT_SLURM_DIR;
  if (std::filesystem::exists(dir + "/up")) return true;
  std::string why = trimmed(read_file(dir + "/skipped"));
  if (why.empty()) {
    why = "no cluster runs in " + dir + " (CTest's slurm_cluster_start test starts it)";
  }
  AMPT_NOTE_SKIP(slurm, why);
  return false;
}

ProcessResult command(const std::vector<std::string>& argv) {
  std::vector<std::string> full{"/usr/bin/env"};
  full.insert(full.end(), argv.begin(), argv.end());
  return run_process(full, {{"SLURM_CONF", conf()}});
}

JobFields job_fields(const std::string& job) {
  const auto shown = command({"scontrol", "--oneliner", "show", "job", job});
  INFO(shown.out << shown.err);
  REQUIRE(shown.exit_code == 0);
  JobFields fields;
  std::istringstream words(shown.out);
  for (std::string word; words >> word;) {
    const auto equals = word.find('=');
    if (equals != std::string::npos)
      fields.emplace(word.substr(0, equals), word.substr(equals + 1));
  }
  return fields;
}

JobFields wait_for_end(const std::string& job, double seconds,
                       const std::function<void(const JobFields&)>& each) {
  static const std::set<std::string> ended = {"COMPLETED", "FAILED",        "CANCELLED",
                                              "TIMEOUT",   "NODE_FAIL",     "PREEMPTED",
                                              "BOOT_FAIL", "OUT_OF_MEMORY", "DEADLINE"};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (true) {
    auto fields = job_fields(job);
    if (each) each(fields);
    if (ended.contains(fields["JobState"]) || std::chrono::steady_clock::now() > deadline) {
      return fields;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));  // one scontrol call per poll
  }
}

SubmitDir::SubmitDir() : path_(make_temp_dir()) {
  std::filesystem::create_directory_symlink(std::string(AMPT_SOURCE_DIR) + "/slurm",
                                            path_ + "/slurm");
}

std::string SubmitDir::sbatch(const std::vector<std::string>& args,
                              const std::map<std::string, std::string>& env) const {
  std::vector<std::string> argv{"/usr/bin/env", "sbatch", "--parsable"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto full_env = env;
  full_env.emplace("SLURM_CONF", conf());
  full_env.emplace("AMPT_EXE", AMPT_BINARY);
  full_env.emplace("OMP_NUM_THREADS", "1");
  const auto submitted = run_process(argv, full_env, path_);
  INFO(submitted.out << submitted.err);
  REQUIRE(submitted.exit_code == 0);
  // --parsable prints "<job id>" or "<job id>;<cluster>".
  return trimmed(submitted.out.substr(0, submitted.out.find(';')));
}

std::string SubmitDir::log(const std::string& job) const {
  return read_file(path_ + "/ampt-" + job + ".out");
}

std::string SubmitDir::output_dir(const std::string& job) const {
  return path_ + "/runs/slurm-" + job;
}

bool SubmitDir::wait_for_training(const std::string& job) const {
  return wait_until([&] { return !read_file(output_dir(job) + "/metrics.jsonl").empty(); }, 60);
}

}  // namespace ampt::test::slurm
