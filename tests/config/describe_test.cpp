#include "ampt/config/describe.h"

#include <catch2/catch.hpp>

#include "ampt/config/options.h"
#include "config_test_support.h"

using namespace ampt::config;
using namespace ampt::config::testing;

TEST_CASE("help lists every flag with its default, constraint and help", "[config][describe]") {
  const std::string help = help_text("ampt train", test_catalog());
  CHECK_THAT(help, Catch::StartsWith("Usage: ampt train "));
  CHECK_THAT(help, Catch::Contains("AMPT_<NAME>"));
  CHECK_THAT(help, Catch::Contains("-h, --help"));
  for (const Option& option : options()) {
    INFO(option.name);
    CHECK_THAT(help, Catch::Contains("--" + option.name));
    CHECK_THAT(help, Catch::Contains(option.help));
  }
  CHECK_THAT(help, Catch::Contains("--mixed_precision no|fp16|bf16|auto"));
  CHECK_THAT(help, Catch::Contains("[>= 1, default: " + std::to_string(Config{}.batch_size) + "]"));
  CHECK_THAT(help, Catch::Contains("default: 65536, YAML scaler.init_scale"));
  CHECK_THAT(help, Catch::Contains("--debug[=BOOL]"));
  CHECK_THAT(help, Catch::Contains("\nscaler:\n"));
  // A flag too long for the column gets a line of its own.
  // --model's values are the catalog's.
  CHECK_THAT(help, Catch::Contains("\n  --model mlp|cnn|gpt|gpt-tiny|gpt2-124m\n"));
}

TEST_CASE("describe prints one aligned line per option with its source", "[config][describe]") {
  TempYaml yaml("training: {lr: 0.01}\n");
  Resolved resolved = resolve_yaml(yaml, {"--batch_size", "8"}, {{"AMPT_SEED", "5"}});
  const std::string text = describe(resolved);

  std::vector<std::string> lines;
  for (std::size_t start = 0, end; (end = text.find('\n', start)) != std::string::npos;
       start = end + 1) {
    lines.push_back(text.substr(start, end - start));
  }
  CHECK(lines.size() == options().size() + sections().size());

  auto line_of = [&](std::string_view name) {
    for (const std::string& line : lines) {
      if (line.starts_with(std::string(name) + " ")) return line;
    }
    return std::string("<missing>");
  };
  CHECK_THAT(line_of("batch_size"), Catch::Matches(R"(batch_size +\= 8 +\(flag --batch_size\))"));
  CHECK_THAT(line_of("seed"), Catch::Matches(R"(seed +\= 5 +\(env AMPT_SEED\))"));
  CHECK_THAT(line_of("lr"), Catch::EndsWith("(" + yaml.at(1) + ")"));
  CHECK_THAT(line_of("epochs"),
             Catch::Matches("epochs +\\= " + std::to_string(Config{}.epochs) + " +\\(default\\)"));
  // Aligned: the '=' and the '(' are in the same column on every option line.
  const auto equals_column = line_of("batch_size").find(" = ");
  const auto source_column = line_of("batch_size").find(" (");
  for (const Option& option : options()) {
    INFO(option.name);
    CHECK(line_of(option.name).find(" = ") == equals_column);
    CHECK(line_of(option.name).find(" (") == source_column);
  }
  CHECK(std::ranges::find(lines, "[training]") != lines.end());
}

TEST_CASE("described_flags rebuilds a run's configuration from its description",
          "[config][describe]") {
  const auto original = resolve({"--model", "gpt2-124m", "--keep_fp32_modules", "ln_*,wte",
                                 "--precision_schedule", "fp32:5,bf16", "--lr", "0.0003",
                                 "--output_dir", "runs/a b"},
                                {{"AMPT_BATCH_SIZE", "12"}});
  const auto flags = described_flags(describe(original));
  CHECK(std::ranges::find(flags, "--batch_size=12") != flags.end());
  CHECK(std::ranges::find(flags, "--output_dir=runs/a b") != flags.end());
  // Defaults are not repeated.
  CHECK(std::ranges::none_of(flags, [](const std::string& f) { return f.starts_with("--seed"); }));
  const auto rebuilt = resolve(flags, {});
  // The same values: only where they came from differs (flags now).
  const auto values = [](const std::string& text) {
    std::string out;
    for (const auto line : split(text, '\n')) out += std::string(line.substr(0, line.rfind("  ("))) + "\n";
    return out;
  };
  CHECK(values(describe(rebuilt)) == values(describe(original)));
}
