// The TensorBoard writer's files, read back with ampt's own record and event readers: what each
// event holds, an earlier run kept as tb.N, and a resumed run that rewrites what was logged after
// its checkpoint (and a record cut short) before it continues. tests/cli/report_to_cli_test.cpp
// reads the same files with TensorBoard's reader.
#include "ampt/log/tensorboard_writer.h"

#include "ampt/log/tb_event.h"
#include "ampt/log/tf_record.h"
#include "support/process.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>

namespace fs = std::filesystem;
namespace tb = ampt::log::tensorboard;
using ampt::test::make_temp_dir;
using ampt::test::read_file;

namespace {

// (step, first tag) of every event in the file; "" for the file-version event.
std::vector<std::pair<int64_t, std::string>> events(const std::string& path) {
  std::vector<std::pair<int64_t, std::string>> found;
  for (const auto& record : ampt::log::read_records(read_file(path))) {
    const auto head = tb::read_event_head(record);
    REQUIRE(head);
    found.emplace_back(head->step, head->tags.empty() ? "" : head->tags.front());
  }
  return found;
}

void log_steps(ampt::log::TensorBoardWriter& writer, int64_t first, int64_t last) {
  for (int64_t n = first; n <= last; ++n) {
    ampt::log::StepReport r;
    r.step = n;
    writer.on_step(r);
    if (n % 2 == 0) {
      ampt::log::EvalReport e;
      e.step = n;
      e.batches = 1;
      writer.on_eval(e);
    }
  }
}

using Events = std::vector<std::pair<int64_t, std::string>>;

}  // namespace

TEST_CASE("tensorboard writer: the file version, the configuration, then an event per report", "[log][tensorboard]") {
  const auto dir = make_temp_dir();
  ampt::log::TensorBoardWriter writer(dir, "a = 1\nb = 2\n");
  writer.on_start({});
  log_steps(writer, 1, 2);
  ampt::log::PrecisionSwitch change;
  change.step = 2;
  change.stage = 2;
  writer.on_precision_switch(change);
  CHECK(fs::path(writer.path()).parent_path() == fs::path(dir) / "tb");
  CHECK(fs::path(writer.path()).filename().string().starts_with("events.out.tfevents."));
  CHECK(fs::path(writer.path()).filename().string().ends_with(fmt::format(".{}.0", getpid())));
  CHECK(events(writer.path()) == Events{{0, ""}, {0, "config"}, {1, "train/loss"},
                                        {2, "train/loss"}, {2, "val/loss"}, {2, "precision/stage"}});
  // The configuration as a Markdown code block.
  const auto records = ampt::log::read_records(read_file(writer.path()));
  CHECK(records[1].find("    a = 1\n    b = 2\n") != std::string::npos);
}

TEST_CASE("tensorboard writer: a fresh run keeps the earlier tb/, a resumed one rewrites and continues it", "[log][tensorboard]") {
  const auto dir = make_temp_dir();
  std::string first_path;
  {
    ampt::log::TensorBoardWriter writer(dir, "x");
    writer.on_start({});
    log_steps(writer, 1, 6);
    first_path = writer.path();
  }
  // Killed while writing step 7's event.
  const auto whole = read_file(first_path);
  ampt::test::write_file(first_path, whole + tb::scalars_event(0.0, 7, {{"train/loss", 1.0}}).substr(0, 9));
  ampt::log::RunInfo resumed;
  resumed.start_step = 4;
  for (int resume = 0; resume < 2; ++resume) {  // resumed at step 4 twice: one config at 4
    ampt::log::TensorBoardWriter writer(dir, "x");
    writer.on_start(resumed);
    CHECK(writer.path() == first_path);
    log_steps(writer, 5, resume == 0 ? 6 : 5);
  }
  CHECK(events(first_path) == Events{{0, ""}, {0, "config"}, {1, "train/loss"}, {2, "train/loss"},
                                     {2, "val/loss"}, {3, "train/loss"}, {4, "train/loss"},
                                     {4, "val/loss"}, {4, "config"}, {5, "train/loss"}});
  CHECK(std::distance(fs::directory_iterator(fs::path(dir) / "tb"), fs::directory_iterator()) == 1);

  ampt::log::TensorBoardWriter fresh(dir, "x");
  fresh.on_start({});
  CHECK(fs::exists(fs::path(dir) / "tb.1" / fs::path(first_path).filename()));
  CHECK(events(fresh.path()) == Events{{0, ""}, {0, "config"}});
}
