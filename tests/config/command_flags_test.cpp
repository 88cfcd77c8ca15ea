// A command's own flag table: parsed with the training options' rules and errors.
#include <catch2/catch.hpp>

#include "ampt/config/command_flags.h"
#include "ampt/core/errors.h"

#include <optional>
#include <string>
#include <vector>

using namespace ampt::config;

namespace {

struct Settings {
  std::string out;
  std::string format = "safetensors";
  bool merge = false;
  int64_t steps = 200;
  std::optional<int64_t> global_batch;
  std::vector<std::string> inputs;
};

FlagTable<Settings> table(bool with_inputs) {
  using S = Settings;
  FlagTable<S> flags = {
      required(flag_only(string_option("out", "", &S::out, true, "PATH", "File to write"))),
      flag_only(choice_option("format", "", &S::format, {"safetensors", "hf"}, "What to write")),
      flag_only(bool_option("merge", "", &S::merge, "Fold the adapters in")),
      flag_only(integer_option("steps", "", &S::steps, Range::at_least(1), "Steps")),
      flag_only(optional_integer_option("global_batch", "", &S::global_batch, Range::at_least(1),
                                        "batch_size x ranks", "Samples a step")),
  };
  if (with_inputs) flags.push_back(required(positional_option("inputs", &S::inputs, "INPUT...", "Inputs")));
  return flags;
}

std::string error_of(const std::vector<std::string>& args, bool with_inputs = false,
                     bool training = false) {
  std::vector<std::string> rest;
  try {
    parse_command_flags("try", table(with_inputs), args, training ? &rest : nullptr);
  } catch (const ampt::UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("command flags: values, defaults and the option's one-line errors", "[config][command_flags]") {
  const auto flags = table(false);
  auto s = parse_command_flags("try", flags, {"--out", "a", "--format=hf", "--merge", "--steps", "7"});
  CHECK(s.out == "a");
  CHECK(s.format == "hf");
  CHECK(s.merge);
  CHECK(s.steps == 7);
  CHECK_FALSE(s.global_batch);
  s = parse_command_flags("try", flags, {"--out=b", "--merge=false", "--global_batch", "64"});
  CHECK(s.format == "safetensors");
  CHECK_FALSE(s.merge);
  CHECK(s.global_batch == 64);

  CHECK(error_of({"--out", "a", "--format", "onnx"}) ==
        "invalid value 'onnx' for format (flag --format): expected one of safetensors, hf");
  CHECK(error_of({"--out", "a", "--steps", "0"}) ==
        "invalid value '0' for steps (flag --steps): expected an integer >= 1");
  CHECK(error_of({"--format", "hf"}) == "ampt try needs --out; see ampt try --help");
  // The last of a repeated flag wins, as for the training options.
  CHECK(parse_command_flags("try", flags, {"--out", "a", "--out", "b"}).out == "b");
  CHECK(error_of({"--out"}) == "flag --out needs a value");
  CHECK(error_of({"--out", "--merge"}) == "ampt try: flag --out needs a value");
  CHECK(error_of({"--out", "a", "--merge", "false"}) ==
        "unexpected argument 'false' (write --merge=false to give a boolean flag a value)");
  // A misspelt flag is named as such before the required flag it left out.
  CHECK(error_of({"--ot", "a"}) == "unknown flag '--ot' (did you mean '--out'?)");
  CHECK(error_of({"--out", "a", "stray"}) == "unexpected argument 'stray'");
  CHECK(error_of({"--out", "a", "--", "stray"}) == "unexpected argument 'stray'");
}

TEST_CASE("command flags: positional arguments, also after --", "[config][command_flags]") {
  const auto flags = table(true);
  const auto s = parse_command_flags("try", flags, {"a.txt", "--out", "o", "b.txt", "--", "--c.txt"});
  CHECK(s.inputs == std::vector<std::string>{"a.txt", "b.txt", "--c.txt"});
  CHECK(error_of({"--out", "o"}, true) == "ampt try needs INPUT...; see ampt try --help");
  CHECK(error_of({"--out", "o", "--stesp", "3", "a.txt"}, true) ==
        "unknown flag '--stesp' (did you mean '--steps'?)");
}

TEST_CASE("command flags: the rest goes to the training options, misspellings suggested from both",
          "[config][command_flags]") {
  const auto flags = table(false);
  std::vector<std::string> rest;
  const auto s = parse_command_flags(
      "try", flags, {"--batch_size", "8", "--out", "a", "--grad_ckpt", "--lr=0.1", "--", "x"}, &rest);
  CHECK(s.out == "a");
  CHECK(rest == std::vector<std::string>{"--batch_size", "8", "--grad_ckpt", "--lr=0.1", "--", "x"});
  CHECK(error_of({"--out", "a", "--stesp", "3"}, false, true) ==
        "unknown flag '--stesp' (did you mean '--steps'?)");
  CHECK(error_of({"--out", "a", "--bach_size", "3"}, false, true) ==
        "unknown flag '--bach_size' (did you mean '--batch_size'?)");
}

TEST_CASE("take_flags removes training flags from an argument list, switches without a value",
          "[config][command_flags]") {
  const auto taken = take_flags({"--model", "gpt", "--batch_size", "8", "--grad_ckpt", "--lr=1",
                                 "--mixed_precision=bf16", "--batch_size_x", "1"},
                                {"batch_size", "grad_ckpt", "mixed_precision"});
  CHECK(taken.values == std::map<std::string, std::string>{
                            {"batch_size", "8"}, {"grad_ckpt", "true"}, {"mixed_precision", "bf16"}});
  CHECK(taken.rest == std::vector<std::string>{"--model", "gpt", "--lr=1", "--batch_size_x", "1"});
}

TEST_CASE("command help lists each flag with its facts", "[config][command_flags]") {
  const auto flags = table(true);
  const auto help = command_help("try", "Usage: ampt try", flag_references(flags), nullptr);
  CHECK_THAT(help, Catch::StartsWith("Usage: ampt try\n\nFlags of ampt try:\n"));
  CHECK_THAT(help, Catch::Contains("--out PATH"));
  CHECK_THAT(help, Catch::Contains("File to write [non-empty, required]"));
  CHECK_THAT(help, Catch::Contains("What to write [default: safetensors]"));
  CHECK_THAT(help, Catch::Contains("Samples a step [>= 1, default: batch_size x ranks]"));
  CHECK_THAT(help, Catch::Contains("  INPUT..."));
  CHECK_THAT(help, !Catch::Contains("Every training option"));
}
