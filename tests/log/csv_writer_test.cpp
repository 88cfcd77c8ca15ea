// metrics.csv: Lightning's columns and its rewrite when a name first appears, Python's float
// spelling, an earlier run kept, a resumed run continued from its checkpoint's step.
#include "ampt/log/csv_writer.h"

#include "support/process.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <limits>

using ampt::test::make_temp_dir;
using ampt::test::read_file;

namespace {

ampt::log::StepReport step(int64_t n, double loss) {
  ampt::log::StepReport r;
  r.step = n;
  r.loss = loss;
  r.lr = 0.001;
  r.grad_norm = 0.5;
  r.samples_per_sec = 100.0;
  r.peak_memory_bytes = 4096;
  return r;
}

ampt::log::EvalReport eval(int64_t n, double loss) {
  ampt::log::EvalReport r;
  r.step = n;
  r.epoch = 1;
  r.loss = loss;
  r.accuracy = 0.25;
  r.batches = 2;
  return r;
}

}  // namespace

TEST_CASE("csv writer: sorted columns, empty cells, the header widened by a rewrite", "[log][csv]") {
  const auto dir = make_temp_dir();
  ampt::log::CsvWriter csv(dir);
  csv.on_start({});
  csv.on_step(step(1, 2.0));
  const std::string train_header =
      "amp/overflows,amp/skipped_steps,epoch,memory/peak_bytes,perf/samples_per_sec,step,"
      "train/grad_norm,train/loss,train/lr\r\n";
  CHECK(read_file(dir + "/metrics.csv") == train_header + "0,0,0,4096,100.0,1,0.5,2.0,0.001\r\n");

  csv.on_eval(eval(1, 1.5));  // new names: the file is rewritten under the wider header
  auto fp16 = step(2, std::numeric_limits<double>::quiet_NaN());
  fp16.loss_scaling = true;
  fp16.scale = 32768.0;
  fp16.lr = 1e-05;
  fp16.grad_norm = -std::numeric_limits<double>::infinity();
  csv.on_step(fp16);
  CHECK(read_file(dir + "/metrics.csv") ==
        "amp/growth_tracker,amp/loss_scale,amp/overflows,amp/skipped_steps,epoch,"
        "memory/peak_bytes,perf/samples_per_sec,step,train/grad_norm,train/loss,train/lr,"
        "val/accuracy,val/loss\r\n"
        ",,0,0,0,4096,100.0,1,0.5,2.0,0.001,,\r\n"
        ",,,,1,,,1,,,,0.25,1.5\r\n"
        "0,32768.0,0,0,0,4096,100.0,2,-inf,nan,1e-05,,\r\n");
}

TEST_CASE("csv writer: a fresh run keeps the earlier file, a resumed one continues it", "[log][csv]") {
  const auto dir = make_temp_dir();
  {
    ampt::log::CsvWriter csv(dir);
    csv.on_start({});
    for (int64_t n = 1; n <= 4; ++n) csv.on_step(step(n, static_cast<double>(n)));
  }
  const auto first = read_file(dir + "/metrics.csv");
  // Killed in the middle of a row.
  ampt::test::write_file(dir + "/metrics.csv", first + "0,0,0,4096,100.0,5,0.5");
  {
    ampt::log::CsvWriter csv(dir);
    ampt::log::RunInfo resumed;
    resumed.start_step = 2;
    csv.on_start(resumed);
    csv.on_step(step(3, 30.0));
  }
  // The header and steps 1 and 2 as they were, then step 3 logged again.
  const auto header_and_two_rows = first.substr(0, first.rfind('\n', first.find(",3,0.5,")) + 1);
  CHECK(header_and_two_rows.ends_with(",2,0.5,2.0,0.001\r\n"));
  const auto resumed = read_file(dir + "/metrics.csv");
  CHECK(resumed == header_and_two_rows + "0,0,0,4096,100.0,3,0.5,30.0,0.001\r\n");

  ampt::log::CsvWriter(dir).on_start({});
  CHECK(read_file(dir + "/metrics.1.csv") == resumed);
  CHECK_FALSE(std::filesystem::exists(dir + "/metrics.csv"));
}
