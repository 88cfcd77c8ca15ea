// The benchmark suite's PyTorch reference (benchmarks/reference.py) trains exactly ampt's models:
// its parameter count for every model and preset equals ampt's.
#include "ampt/models/registry.h"
#include "ampt/plan/memory_estimate.h"
#include "support/process.h"
#include "support/skip.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <sstream>

TEST_CASE("benchmark reference models have ampt's parameter counts", "[models][benchmarks]") {
  if (!std::filesystem::exists(AMPT_PYTHON)) {
    AMPT_SKIP(reference, "no Python at " AMPT_PYTHON ": reference model check not run");
  }
  const std::vector<std::string> models = {"mlp",       "cnn",       "gpt-tiny",  "gpt2-124m",
                                           "gpt2-350m", "gpt2-774m", "gpt2-1558m"};
  // On the meta device: the shapes without the gigabytes and the initialisation time.
  std::string script =
      "import sys, torch; sys.path.insert(0, '" AMPT_SOURCE_DIR "/benchmarks'); "
      "import reference as r\n"
      "for m in sys.argv[1:]:\n"
      "    with torch.device('meta'):\n"
      "        model = r.build(r.parser().parse_args(['--model', m, '--batch_size', '1', "
      "'--device', 'cpu']))[0]\n"
      "    print(m, sum(p.numel() for p in model.parameters()))\n";
  std::vector<std::string> argv{AMPT_PYTHON, "-c", script};
  argv.insert(argv.end(), models.begin(), models.end());
  const auto r = ampt::test::run_process(argv);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::map<std::string, int64_t> python;
  std::istringstream lines(r.out);
  for (std::string name; lines >> name;) lines >> python[name];

  for (const auto& model : models) {
    ampt::config::Config config;
    config.model = model;
    const auto dims = ampt::models::model_dims(config, {}, 0);
    INFO(model);
    // Building the GPT-2 sizes here would take seconds and gigabytes; memory_estimate_test
    // checks the count formula against the built presets.
    if (dims.transformer() && model != "gpt-tiny") {
      CHECK(python.at(model) == ampt::plan::count_parameters(dims).total);
      continue;
    }
    ampt::data::DataSpec spec;
    if (dims.transformer()) {
      spec = {ampt::data::Task::language_model, {dims.seq_len}, dims.classes};
    } else {
      spec = {ampt::data::Task::classification, dims.input_shape, dims.classes};
    }
    CHECK(python.at(model) ==
          ampt::models::parameter_count(*ampt::models::make_model(config, spec).module));
  }
}
