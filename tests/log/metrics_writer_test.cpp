#include "ampt/log/metrics_writer.h"

#include "support/process.h"

#include <catch2/catch.hpp>

#include <filesystem>

namespace fs = std::filesystem;
using ampt::test::make_temp_dir;
using ampt::test::read_file;

TEST_CASE("metrics writer: one JSON object per logged step, non-finite as null", "[log][metrics]") {
  const auto dir = make_temp_dir() + "/nested/out";
  {
    ampt::log::MetricsWriter writer(dir);
    writer.on_start({});
    ampt::log::StepReport r;
    r.step = 10;
    r.loss = 1.5;
    r.lr = 0.001;
    r.grad_norm = std::numeric_limits<double>::infinity();
    r.loss_scaling = true;
    r.scale = 32768.0;
    r.overflows = 2;
    r.skipped_steps = 2;
    writer.on_step(r);
    r.step = 20;
    writer.on_step(r);
  }
  const auto text = read_file(dir + "/metrics.jsonl");
  CHECK(text.find(R"({"step": 10, "epoch": 0, "loss": 1.5, "lr": 0.001, "grad_norm": null,)") == 0);
  CHECK(text.find(R"("loss_scaling": true, "scale": 32768, "growth_tracker": 0, "overflows": 2, "skipped_steps": 2, "grad_underflow": null})") != std::string::npos);
  CHECK(std::count(text.begin(), text.end(), '\n') == 2);
}

TEST_CASE("metrics writer: an earlier run's metrics are kept, not overwritten", "[log][metrics]") {
  const auto dir = make_temp_dir();
  ampt::test::write_file(dir + "/metrics.jsonl", "{\"step\": 1}\n");
  ampt::test::write_file(dir + "/metrics.1.jsonl", "{\"step\": 0}\n");
  ampt::log::MetricsWriter(dir).on_start({});
  CHECK(read_file(dir + "/metrics.2.jsonl") == "{\"step\": 1}\n");
  CHECK(read_file(dir + "/metrics.1.jsonl") == "{\"step\": 0}\n");
  CHECK(read_file(dir + "/metrics.jsonl").empty());
}

TEST_CASE("metrics writer: an output_dir that cannot be created is a clear error", "[log][metrics]") {
  const auto dir = make_temp_dir();
  ampt::test::write_file(dir + "/file", "x");
  ampt::log::MetricsWriter writer(dir + "/file/sub");
  CHECK(!std::filesystem::exists(dir + "/file/sub"));  // nothing is touched before the run starts
  CHECK_THROWS_WITH(writer.on_start({}),
                    Catch::StartsWith("cannot create output_dir '" + dir + "/file/sub'"));
}

TEST_CASE("metrics writer: a resumed run continues the file from its checkpoint step", "[log][metrics]") {
  const auto dir = make_temp_dir();
  ampt::test::write_file(dir + "/metrics.jsonl",
                         "{\"step\": 10, \"loss\": 1}\n{\"step\": 20, \"loss\": 2}\n"
                         "{\"step\": 30, \"loss\": 3}\n{\"step\": 40, \"lo");
  ampt::log::MetricsWriter writer(dir);
  ampt::log::RunInfo info;
  info.start_step = 20;
  writer.on_start(info);
  ampt::log::StepReport r;
  r.step = 30;
  writer.on_step(r);
  const auto text = read_file(dir + "/metrics.jsonl");
  CHECK(text.find("{\"step\": 10, \"loss\": 1}\n{\"step\": 20, \"loss\": 2}\n{\"step\": 30, \"epoch\"") == 0);
  CHECK(std::count(text.begin(), text.end(), '\n') == 3);
  CHECK(!std::filesystem::exists(dir + "/metrics.1.jsonl"));
}

TEST_CASE("metrics writer: checkpoint events, and the summary's throughput and time split", "[log][metrics]") {
  const auto dir = make_temp_dir();
  {
    ampt::log::MetricsWriter writer(dir);
    writer.on_start({});
    ampt::log::CheckpointReport saved;
    saved.step = 10;
    saved.path = "out/ckpt-00000010.pt";
    saved.bytes = 1234;
    saved.pause_seconds = 0.25;
    saved.wait_seconds = 0.125;
    saved.write_seconds = 1.5;
    writer.on_checkpoint(saved);
    ampt::log::CheckpointReport failed = saved;
    failed.step = 20;
    failed.error = "cannot write 'out/ckpt-00000020.pt': File too large (EFBIG)";
    writer.on_checkpoint(failed);
    ampt::log::RunSummary s;
    s.samples_per_sec = 100.0;
    s.tokens_per_sec = 6400.0;
    s.steady_first_step = 2;
    s.steady_last_step = 20;
    s.seconds = 10.0;
    s.startup_seconds = 1.0;
    s.training_seconds = 7.5;
    s.eval_seconds = 1.0;
    s.checkpoint_seconds = 0.5;
    s.checkpoints_saved = 1;
    s.checkpoint_bytes = 1234;
    s.checkpoint_write_seconds = 1.5;
    writer.on_end(s);
  }
  CHECK(read_file(dir + "/metrics.jsonl") ==
        R"({"step": 10, "event": "checkpoint", "path": "out/ckpt-00000010.pt", "bytes": 1234, )"
        R"("pause_seconds": 0.25, "wait_seconds": 0.125, "write_seconds": 1.5, "error": null})"
        "\n"
        R"({"step": 20, "event": "checkpoint", "path": "out/ckpt-00000010.pt", "bytes": 1234, )"
        R"x("pause_seconds": 0.25, "wait_seconds": 0.125, "write_seconds": 1.5, "error": "cannot write 'out/ckpt-00000020.pt': File too large (EFBIG)"})x"
        "\n");
  const auto summary = read_file(dir + "/summary.json");
  CHECK_THAT(summary, Catch::Contains(R"("samples_per_sec": 100, "tokens_per_sec": 6400, "steady_first_step": 2, "steady_last_step": 20, )"));
  CHECK_THAT(summary, Catch::Contains(R"("seconds": 10, "startup_seconds": 1, "training_seconds": 7.5, "eval_seconds": 1, "checkpoint_seconds": 0.5, )"
                                      R"("checkpoints_saved": 1, "checkpoint_bytes": 1234, "checkpoint_write_seconds": 1.5, )"));
}
