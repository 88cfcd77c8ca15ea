#include "ampt/commands/compare.h"

#include "ampt/commands/compare_report.h"

#include "ampt/config/resolve.h"
#include "ampt/config/values.h"
#include "ampt/config/command_flags.h"
#include "ampt/config/suggest.h"
#include "ampt/core/errors.h"
#include "ampt/core/json_text.h"
#include "ampt/log/logger.h"
#include "ampt/models/catalog.h"
#include "ampt/models/model_family.h"
#include "ampt/precision/choice.h"
#include "ampt/device/device.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

namespace ampt::commands {
namespace {

namespace fs = std::filesystem;

// Why `text` is no list of compare's formats ("" when it is one); `chosen` receives the formats
// it names.
std::string formats_problem(std::string_view text, std::vector<CompareFormat>* chosen = nullptr) {
  if (text == "auto") return "";
  std::vector<std::string> known;
  for (const auto& f : compare_formats()) known.push_back(f.name);
  std::vector<std::string> names;
  for (const auto part : config::split(text, ',')) {
    const std::string name(part);
    const auto at = std::ranges::find(compare_formats(), name, &CompareFormat::name);
    if (at == compare_formats().end()) {
      const auto near = config::closest(name, known);
      return fmt::format("unknown format '{}'{}: expected auto or a comma-separated list of {}",
                         name, near ? " (did you mean '" + *near + "'?)" : "",
                         fmt::join(known, ", "));
    }
    if (std::ranges::find(names, name) != names.end()) {
      return fmt::format("format '{}' is listed twice", name);
    }
    names.push_back(name);
    if (chosen != nullptr) chosen->push_back(*at);
  }
  return "";
}

// What compare takes besides the training options.
struct CompareSettings {
  int64_t steps = 200;
  std::string formats = "auto";
};

const config::FlagTable<CompareSettings>& compare_flags() {
  using S = CompareSettings;
  static const config::FlagTable<S> table = {
      config::flag_only(config::integer_option("steps", "", &S::steps, config::Range::at_least(1),
                                               "Optimizer steps to train in each format")),
      config::flag_only(config::explained_string_option(
          "formats", "", &S::formats, [](std::string_view text) { return formats_problem(text); },
          "auto or a comma-separated list of fp32, bf16, fp16, fp8", "LIST",
          "Formats to compare (fp32, bf16, fp16, fp8); auto: fp32,bf16,fp16 and fp8 where the "
          "device has it. Rows compare against fp32 (or the first format when fp32 is not "
          "listed)")),
  };
  return table;
}

// The child's own one-line error, if its log has one.
std::string error_line(const std::string& log_path) {
  std::ifstream in(log_path);
  std::string found;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("ampt: error: ")) found = line.substr(13);
  }
  return found;
}

// Runs `ampt train` (this same executable) with stdout and stderr in `log_path`; returns its exit
// status (128 + signal when killed).
int run_child(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
              const std::string& log_path) {
  std::vector<std::string> env_lines;
  for (const auto& [key, value] : env) env_lines.push_back(key + "=" + value);
  std::vector<char*> argv{const_cast<char*>("ampt")};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (auto& e : env_lines) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    throw RuntimeError(fmt::format("cannot start ampt train for compare: {}", std::strerror(rc)));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw RuntimeError("waiting for ampt train failed: " + std::string(std::strerror(errno)));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::out | std::ios::trunc);
  out << text;
  out.flush();
  if (!out) throw RuntimeError(fmt::format("cannot write '{}'", path.string()));
}

}  // namespace

const std::vector<CompareFormat>& compare_formats() {
  static const std::vector<CompareFormat> formats = {
      {"fp32", "no"},
      {"bf16", "bf16"},
      {"fp16", "fp16"},
      {"fp8", "fp8"},
  };
  return formats;
}

std::vector<config::FlagReference> compare_flag_references() {
  return config::flag_references(compare_flags());
}

std::string compare_help() {
  return config::command_help(
      "compare",
      "Usage: ampt compare [--steps N] [--formats LIST] [TRAINING OPTIONS]...\n\n"
      "Trains the same configuration for N steps in each format, from the same initial weights\n"
      "and data order (same seed), each in its own process (so peak memory is per format), and\n"
      "prints one table: Format, Peak memory, Memory vs fp32, Throughput, Speed vs fp32, Final\n"
      "loss, Δ loss vs fp32, Skipped steps, Stability. The table is also written to output_dir\n"
      "as compare.md, compare.csv and compare.json; each run's logs, summary.json and\n"
      "checkpoint are in output_dir/<format>.",
      compare_flag_references(), &models::catalog());
}

int run_compare(const std::vector<std::string>& args, const Environment& env) {
  std::vector<std::string> training_args;
  const auto flags = config::parse_command_flags("compare", compare_flags(), args, &training_args);
  const int64_t steps = flags.steps;
  const auto& formats_text = flags.formats;
  std::vector<CompareFormat> formats;
  formats_problem(formats_text == "auto" ? "fp32,bf16,fp16" : formats_text, &formats);
  // Settings compare owns must not also come as flags; from YAML or env they are overridden.
  const auto train_args =
      config::take_flags(training_args, {"mixed_precision", "max_steps", "output_dir"});
  for (const auto* name : {"mixed_precision", "max_steps"}) {
    if (train_args.values.contains(name)) {
      throw UsageError(fmt::format("ampt compare sets --{} for each run: use {}", name,
                                   std::string(name) == "max_steps" ? "--steps" : "--formats"));
    }
  }
  const auto resolved = config::resolve(training_args, env, models::catalog());
  const auto& config = resolved.config();
  if (!config.resume.empty()) {
    throw UsageError(fmt::format("ampt compare starts every format from the same fresh weights: "
                                 "drop resume '{}'",
                                 config.resume));
  }
  const auto run_args = [&](const CompareFormat& format, const std::string& dir) {
    auto a = train_args.rest;
    a.insert(a.end(), {"--mixed_precision", format.mixed_precision, "--max_steps",
                       std::to_string(steps), "--output_dir", dir});
    return a;
  };
  if (formats_text == "auto") {
    // fp8 joins where the device has it; elsewhere one line says why not.
    try {
      precision::choose_precision(config::MixedPrecision::fp8, true,
                                  device::select_device(config.device).device);
      formats.push_back(*std::ranges::find(compare_formats(), "fp8", &CompareFormat::name));
    } catch (const RuntimeError& e) {
      log::info("[compare] fp8 not compared: {}", e.what());
    }
  }
  const fs::path root(config.output_dir);
  // Every run's configuration, and whether the device has each format, are checked before the
  // first run starts.
  for (const auto& format : formats) {
    const auto run_config =
        config::resolve(run_args(format, (root / format.name).string()), env, models::catalog()).config();
    try {
      const auto choice =
          precision::choose_precision(run_config.mixed_precision, run_config.strict_precision,
                                      device::select_device(run_config.device).device);
      // Its run's log says so too; the comparison's speed column is read here.
      if (!choice.warning.empty()) log::warn("[compare] {}: {}", format.name, choice.warning);
    } catch (const RuntimeError& e) {
      throw RuntimeError(fmt::format("format {}: {}", format.name, e.what()));
    }
  }

  CompareReport report;
  report.steps = steps;
  report.language_model = models::family_of(config).language_model;
  report.baseline =
      std::ranges::find(formats, "fp32", &CompareFormat::name) != formats.end() ? "fp32"
                                                                                 : formats[0].name;
  int status = 0;
  for (const auto& format : formats) {
    const auto dir = root / format.name;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw RuntimeError(fmt::format("cannot create '{}': {}", dir.string(), ec.message()));
    fs::remove(dir / "summary.json", ec);  // a summary left by an earlier compare is not this one's
    const auto log_path = (dir / "train.log").string();
    log::info("[compare] {}: {} steps in {} (log {})", format.name, steps, dir.string(), log_path);
    auto args_for_run = run_args(format, dir.string());
    args_for_run.insert(args_for_run.begin(), "train");
    const int code = run_child(args_for_run, env, log_path);
    auto result = read_summary(format.name, dir.string());
    // A run that wrote its summary is a row even when it stopped early (a signal, a diverging
    // run stopped by ampt): its stability says so. Without a summary the format failed.
    if (!result) {
      const auto line = error_line(log_path);
      result.emplace();
      result->format = format.name;
      result->output_dir = dir.string();
      result->error = !line.empty() ? line : fmt::format("exit status {}, see {}", code, log_path);
      status = 1;
    }
    log::info("[compare] {}: {}", format.name, stability(*result, steps));
    report.results.push_back(*result);
  }

  const auto table = compare_markdown(report);
  const auto* any = baseline_of(report);
  const std::string note = fmt::format(
      "{} steps per format; peak memory is the {}; Δ loss is the final step's loss minus {}'s "
      "(same batch).\n",
      steps, any ? any->peak_memory_kind : "peak", report.baseline);
  log::write_line("\n" + table + "\n" + note);
  write_text(root / "compare.md", "# ampt compare\n\n" + table + "\n" + note);
  write_text(root / "compare.csv", compare_csv(report));
  write_text(root / "compare.json", compare_json(report));
  log::info("[compare] wrote {}, compare.csv and compare.json", (root / "compare.md").string());
  return status;
}

}  // namespace ampt::commands
