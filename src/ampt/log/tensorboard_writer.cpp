#include "ampt/log/tensorboard_writer.h"

#include "ampt/core/errors.h"
#include "ampt/core/whole_file.h"
#include "ampt/log/logger.h"
#include "ampt/log/run_files.h"
#include "ampt/log/tb_event.h"
#include "ampt/log/tf_record.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <sstream>
#include <system_error>
#include <vector>

namespace ampt::log {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kConfigTag = "config";

double wall_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::vector<fs::path> event_files(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const auto name = entry.path().filename().string();
    if (entry.is_regular_file() && name.starts_with("events.out.tfevents.")) {
      files.push_back(entry.path());
    }
  }
  std::ranges::sort(files);  // <time> has ten digits: the newest file sorts last
  return files;
}

std::string host_name() {
  std::array<char, 256> host{};
  return gethostname(host.data(), host.size() - 1) == 0 ? host.data() : "localhost";
}

std::string new_file_name() {
  return fmt::format("events.out.tfevents.{:010d}.{}.{}.0",
                     static_cast<int64_t>(std::time(nullptr)), host_name(), getpid());
}

// The events a run resumed at `step` keeps: those up to its checkpoint, less the configuration
// an earlier resume at the same step stored (this run stores its own).
bool kept_on_resume(std::string_view event, int64_t step) {
  const auto head = tensorboard::read_event_head(event);
  if (!head || head->step > step) return false;
  return head->step < step || std::ranges::find(head->tags, kConfigTag) == head->tags.end();
}

// Four spaces make the configuration a code block in the text plugin's Markdown.
std::string as_markdown_code(const std::string& text) {
  std::string out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) out += "    " + line + "\n";
  return out;
}

}  // namespace

TensorBoardWriter::TensorBoardWriter(const std::string& output_dir, std::string config_text)
    : dir_((fs::path(output_dir) / "tb").string()), config_text_(std::move(config_text)) {}

void TensorBoardWriter::on_start(const RunInfo& info) {
  run_ = info;
  if (info.start_step > 0) {
    continue_files(info.start_step);
  } else if (fs::exists(dir_) && !event_files(dir_).empty()) {
    keep_earlier_run(dir_, "TensorBoard events");
  }
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw RuntimeError("cannot create '" + dir_ + "': " + ec.message());
  const auto existing = event_files(dir_);
  const bool fresh = info.start_step == 0 || existing.empty();
  path_ = fresh ? (fs::path(dir_) / new_file_name()).string() : existing.back().string();
  out_.open(path_, std::ios::binary | std::ios::app);
  if (!out_) throw RuntimeError("cannot open '" + path_ + "' for writing");
  if (fresh) write(tensorboard::file_version_event(wall_time()));
  write(tensorboard::text_event(wall_time(), info.start_step, kConfigTag,
                                as_markdown_code(config_text_)));
  log::info("[AMP] TensorBoard events: {} (view with: tensorboard --logdir {})", path_, dir_);
}

void TensorBoardWriter::continue_files(int64_t start_step) {
  for (const auto& file : event_files(dir_)) {
    const auto bytes = read_whole_file(file.string());
    std::string kept;
    for (const auto& event : read_records(bytes)) {
      if (kept_on_resume(event, start_step)) kept += frame_record(event);
    }
    if (kept != bytes) replace_file(file, kept);
  }
}

void TensorBoardWriter::write(const std::string& event) {
  out_ << frame_record(event);
  out_.flush();
  if (!out_) throw RuntimeError("cannot write TensorBoard events to '" + path_ + "'");
}

void TensorBoardWriter::on_step(const StepReport& report) {
  write(tensorboard::scalars_event(wall_time(), report.step, step_scalars(report, run_)));
}

void TensorBoardWriter::on_eval(const EvalReport& report) {
  if (report.batches == 0) return;
  write(tensorboard::scalars_event(wall_time(), report.step, eval_scalars(report)));
}

void TensorBoardWriter::on_precision_switch(const PrecisionSwitch& change) {
  write(tensorboard::scalars_event(wall_time(), change.step, {stage_scalar(change)}));
}

}  // namespace ampt::log
