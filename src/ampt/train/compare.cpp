#include "ampt/train/compare.h"

#include "ampt/config/resolve.h"
#include "ampt/config/subcommand_flags.h"
#include "ampt/config/suggest.h"
#include "ampt/core/errors.h"
#include "ampt/core/json_text.h"
#include "ampt/log/logger.h"
#include "ampt/models/gpt_presets.h"
#include "ampt/precision/choice.h"
#include "ampt/train/device.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

namespace ampt::train {
namespace {

namespace fs = std::filesystem;

const std::vector<config::SubcommandFlag>& own_flags() {
  static const std::vector<config::SubcommandFlag> flags = {
      {"steps", "N", "200", "Optimizer steps to train in each format"},
      {"formats", "LIST", "fp32,bf16,fp16",
       "Comma-separated formats to compare; the first table rows compare against fp32 (or the "
       "first format when fp32 is not listed)"},
  };
  return flags;
}

// Training flags compare sets itself for each run.
const std::vector<config::SubcommandFlag>& per_run_flags() {
  static const std::vector<config::SubcommandFlag> flags = {
      {"mixed_precision", "FORMAT", "", ""},
      {"max_steps", "N", "", ""},
      {"output_dir", "DIR", "", ""},
  };
  return flags;
}

int64_t parse_steps(const std::string& text) {
  int64_t steps = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), steps);
  if (ec != std::errc() || end != text.data() + text.size() || steps < 1) {
    throw UsageError(fmt::format("invalid value '{}' for --steps: expected an integer >= 1", text));
  }
  return steps;
}

std::vector<CompareFormat> parse_formats(const std::string& text) {
  std::vector<std::string> known;
  for (const auto& f : compare_formats()) known.push_back(f.name);
  std::vector<CompareFormat> chosen;
  std::stringstream in(text);
  for (std::string name; std::getline(in, name, ',');) {
    const auto at = std::ranges::find(compare_formats(), name, &CompareFormat::name);
    if (at == compare_formats().end()) {
      const auto near = config::closest(name, known);
      throw UsageError(fmt::format("unknown format '{}' in --formats{}: expected a comma-separated "
                                   "list of {}",
                                   name, near ? " (did you mean '" + *near + "'?)" : "",
                                   fmt::join(known, ", ")));
    }
    if (std::ranges::find(chosen, name, &CompareFormat::name) != chosen.end()) {
      throw UsageError(fmt::format("format '{}' is listed twice in --formats '{}'", name, text));
    }
    chosen.push_back(*at);
  }
  if (chosen.empty()) {
    throw UsageError(fmt::format("--formats is empty: expected a comma-separated list of {}",
                                 fmt::join(known, ", ")));
  }
  return chosen;
}

double number_or_nan(const YAML::Node& node) {
  if (!node || node.IsNull()) return std::numeric_limits<double>::quiet_NaN();
  return node.as<double>();
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

std::string human_bytes(int64_t bytes) {
  const double mib = static_cast<double>(bytes) / (1024.0 * 1024.0);
  return mib >= 1024.0 ? fmt::format("{:.2f} GiB", mib / 1024.0) : fmt::format("{:.1f} MiB", mib);
}

std::string human_rate(double rate) {
  if (rate >= 1e6) return fmt::format("{:.2f}M", rate / 1e6);
  if (rate >= 1e4) return fmt::format("{:.1f}K", rate / 1e3);
  return fmt::format("{:.0f}", rate);
}

double throughput(const CompareReport& report, const FormatResult& r) {
  return report.language_model ? r.tokens_per_sec : r.samples_per_sec;
}

const FormatResult* baseline_of(const CompareReport& report) {
  for (const auto& r : report.results) {
    if (r.format == report.baseline && r.error.empty()) return &r;
  }
  return nullptr;
}

// The numbers a row shows, NaN where there is nothing to show.
struct Row {
  double memory_ratio, speed_ratio, delta_loss;
};

Row ratios(const CompareReport& report, const FormatResult& r) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const auto* base = baseline_of(report);
  if (base == nullptr || !r.error.empty()) return {nan, nan, nan};
  return {static_cast<double>(r.peak_memory_bytes) /
              std::max<double>(1.0, static_cast<double>(base->peak_memory_bytes)),
          throughput(report, r) / std::max(1e-12, throughput(report, *base)),
          r.final_loss - base->final_loss};
}

std::string fixed(double value, const char* format) {
  return std::isfinite(value) ? fmt::format(fmt::runtime(format), value) : "–";
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

std::string stability(const FormatResult& r, int64_t requested_steps) {
  if (!r.error.empty()) return "failed: " + r.error;
  // Skipped steps leave the loss where it was: a run that skipped most of its steps did not train.
  if (!std::isfinite(r.final_loss) || r.final_loss > 1.2 * r.initial_loss ||
      2 * r.skipped_steps > r.steps) {
    return "diverged";
  }
  if (r.steps < requested_steps) return fmt::format("stopped at step {}", r.steps);
  if (r.skipped_steps > 0) {
    return fmt::format("{} overflow{}", r.skipped_steps, r.skipped_steps == 1 ? "" : "s");
  }
  return "ok";
}

std::optional<FormatResult> read_summary(const std::string& format, const std::string& output_dir) {
  const auto path = fs::path(output_dir) / "summary.json";
  if (!fs::exists(path)) return std::nullopt;
  YAML::Node s;
  try {
    s = YAML::LoadFile(path.string());  // JSON is YAML
  } catch (const YAML::Exception& e) {
    throw RuntimeError(fmt::format("cannot read '{}': {}", path.string(), e.what()));
  }
  FormatResult r;
  r.format = format;
  r.output_dir = output_dir;
  try {
    r.steps = s["steps"].as<int64_t>();
    r.initial_loss = number_or_nan(s["initial_loss"]);
    r.final_loss = number_or_nan(s["final_loss"]);
    const double val = number_or_nan(s["final_val_loss"]);
    r.final_val_loss = std::isfinite(val) ? val : -1.0;
    r.skipped_steps = s["skipped_steps"].as<int64_t>();
    r.samples_per_sec = number_or_nan(s["samples_per_sec"]);
    r.tokens_per_sec = number_or_nan(s["tokens_per_sec"]);
    r.seconds = number_or_nan(s["seconds"]);
    r.peak_memory_bytes = s["peak_memory_bytes"].as<int64_t>();
    r.peak_memory_kind = s["peak_memory_kind"].as<std::string>();
  } catch (const YAML::Exception& e) {
    throw RuntimeError(fmt::format("'{}' lacks a field compare needs: {}", path.string(), e.what()));
  }
  return r;
}

std::string compare_markdown(const CompareReport& report) {
  const auto& b = report.baseline;
  const char* unit = report.language_model ? "tok/s" : "samples/s";
  std::string text = fmt::format(
      "| Format | Peak memory | Memory vs {0} | Throughput | Speed vs {0} | Final loss | "
      "Δ loss vs {0} | Skipped steps | Stability |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---|\n",
      b);
  for (const auto& r : report.results) {
    const auto row = ratios(report, r);
    if (!r.error.empty()) {
      text += fmt::format("| {} | – | – | – | – | – | – | – | {} |\n", r.format,
                          stability(r, report.steps));
      continue;
    }
    text += fmt::format("| {} | {} | {} | {} {} | {} | {} | {} | {} of {} | {} |\n", r.format,
                        human_bytes(r.peak_memory_bytes), fixed(row.memory_ratio, "{:.2f}×"),
                        human_rate(throughput(report, r)), unit,
                        fixed(row.speed_ratio, "{:.2f}×"), fixed(r.final_loss, "{:.4f}"),
                        fixed(row.delta_loss, "{:+.4f}"), r.skipped_steps, r.steps,
                        stability(r, report.steps));
  }
  return text;
}

std::string compare_csv(const CompareReport& report) {
  std::string text =
      "format,peak_memory_bytes,memory_vs_baseline,throughput,throughput_unit,speed_vs_baseline,"
      "final_loss,delta_loss_vs_baseline,skipped_steps,steps,stability,baseline\n";
  const auto csv_number = [](double v) { return std::isfinite(v) ? fmt::format("{}", v) : ""; };
  for (const auto& r : report.results) {
    const auto row = ratios(report, r);
    std::string status = stability(r, report.steps);
    std::ranges::replace(status, '"', '\'');
    const bool ran = r.error.empty();
    text += fmt::format("{},{},{},{},{},{},{},{},{},{},\"{}\",{}\n", r.format,
                        ran ? fmt::format("{}", r.peak_memory_bytes) : "",
                        csv_number(row.memory_ratio),
                        ran ? csv_number(throughput(report, r)) : "",
                        report.language_model ? "tokens/s" : "samples/s",
                        csv_number(row.speed_ratio), ran ? csv_number(r.final_loss) : "",
                        csv_number(row.delta_loss), ran ? fmt::format("{}", r.skipped_steps) : "",
                        ran ? fmt::format("{}", r.steps) : "", status, report.baseline);
  }
  return text;
}

std::string compare_json(const CompareReport& report) {
  std::vector<std::string> rows;
  for (const auto& r : report.results) {
    const auto row = ratios(report, r);
    const bool ran = r.error.empty();
    const double nan = std::numeric_limits<double>::quiet_NaN();
    rows.push_back(fmt::format(
        R"(    {{"format": {}, "stability": {}, "steps": {}, "peak_memory_bytes": {}, )"
        R"("memory_vs_baseline": {}, "throughput": {}, "speed_vs_baseline": {}, )"
        R"("initial_loss": {}, "final_loss": {}, "delta_loss_vs_baseline": {}, )"
        R"("final_val_loss": {}, "skipped_steps": {}, "seconds": {}, "output_dir": {}}})",
        json_string(r.format), json_string(stability(r, report.steps)), r.steps,
        ran ? fmt::format("{}", r.peak_memory_bytes) : "null", json_number(row.memory_ratio),
        json_number(ran ? throughput(report, r) : nan), json_number(row.speed_ratio),
        json_number(ran ? r.initial_loss : nan), json_number(ran ? r.final_loss : nan),
        json_number(row.delta_loss), r.final_val_loss >= 0.0 ? json_number(r.final_val_loss) : "null",
        r.skipped_steps, json_number(ran ? r.seconds : nan), json_string(r.output_dir)));
  }
  std::string kind;
  for (const auto& r : report.results) {
    if (!r.peak_memory_kind.empty()) kind = r.peak_memory_kind;
  }
  return fmt::format(
      "{{\n  \"steps\": {},\n  \"baseline\": {},\n  \"throughput_unit\": {},\n"
      "  \"peak_memory_kind\": {},\n  \"formats\": [\n{}\n  ]\n}}\n",
      report.steps, json_string(report.baseline),
      json_string(report.language_model ? "tokens/s" : "samples/s"), json_string(kind),
      fmt::join(rows, ",\n"));
}

std::string compare_help() {
  return config::subcommand_help(
      "ampt compare",
      "Usage: ampt compare [--steps N] [--formats LIST] [TRAINING OPTIONS]...\n\n"
      "Trains the same configuration for N steps in each format, from the same initial weights\n"
      "and data order (same seed), each in its own process (so peak memory is per format), and\n"
      "prints one table: Format, Peak memory, Memory vs fp32, Throughput, Speed vs fp32, Final\n"
      "loss, Δ loss vs fp32, Skipped steps, Stability. The table is also written to output_dir\n"
      "as compare.md, compare.csv and compare.json; each run's logs, summary.json and\n"
      "checkpoint are in output_dir/<format>.",
      own_flags());
}

int run_compare(const std::vector<std::string>& args,
                const std::map<std::string, std::string>& env) {
  const auto split = config::split_subcommand_flags(args, own_flags());
  const int64_t steps = parse_steps(split.values.at("steps"));
  const auto formats = parse_formats(split.values.at("formats"));
  // Settings compare owns must not also come as flags; from YAML or env they are overridden.
  const auto train_args = config::split_subcommand_flags(split.rest, per_run_flags());
  for (const auto* name : {"mixed_precision", "max_steps"}) {
    if (!train_args.values.at(name).empty()) {
      throw UsageError(fmt::format("ampt compare sets --{} for each run: use {}", name,
                                   std::string(name) == "max_steps" ? "--steps" : "--formats"));
    }
  }
  const auto resolved = config::resolve(split.rest, env);
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
  const fs::path root(config.output_dir);
  // Every run's configuration, and whether the device has each format, are checked before the
  // first run starts.
  for (const auto& format : formats) {
    const auto run_config =
        config::resolve(run_args(format, (root / format.name).string()), env).config();
    try {
      precision::choose_precision(run_config.mixed_precision, run_config.strict_precision,
                                  select_device(run_config.device).device);
    } catch (const RuntimeError& e) {
      throw RuntimeError(fmt::format("format {}: {}", format.name, e.what()));
    }
  }

  CompareReport report;
  report.steps = steps;
  report.language_model = models::is_gpt(config.model);
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

}  // namespace ampt::train
