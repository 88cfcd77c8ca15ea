// `ampt tokenize` writes the llm.c shard that llm.c's and nanoGPT's loaders read, with tiktoken's
// GPT-2 ids, and refuses bad arguments with one line.
#include "data/data_fixtures.h"
#include "support/process.h"
#include "text/text_fixtures.h"

#include <catch2/catch.hpp>

#include <filesystem>

using ampt::test::make_temp_dir;
using ampt::test::run_ampt;
using ampt::test::run_process;
using ampt::test::write_file;

namespace {

bool have_references() {
  if (!ampt::test::have_gpt2_ranks()) {
    WARN("skipping: " << ampt::test::gpt2_ranks_path() << " not fetched (run scripts/bootstrap.sh)");
    return false;
  }
  if (run_process({AMPT_PYTHON, "-c", "import numpy, tiktoken"}).exit_code != 0) {
    WARN("skipping: numpy or tiktoken missing in " AMPT_PYTHON " (run scripts/bootstrap.sh)");
    return false;
  }
  return true;
}

}  // namespace

TEST_CASE("tokenize: the shard holds tiktoken's GPT-2 ids, <|endoftext|> before each document",
          "[commands][tokenize][python]") {
  if (!have_references()) return;
  const auto dir = make_temp_dir();
  write_file(dir + "/in/a.txt",
             "Hello, world! It's a test.\n<|endoftext|> stays text here.\n"
             "Caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x91\x8D, invalid \xFF bytes\n");
  write_file(dir + "/in/b.jsonl",
             "{\"body\": \"first record\", \"text\": \"not this\"}\n\n"
             "{\"body\": \"second\\nrecord \\u00e9\"}\n{\"body\": \"\"}\n");
  std::string long_line(3000, 'x');
  long_line += " the end";
  write_file(dir + "/c.txt", long_line);
  const auto out = dir + "/shard.bin";
  const auto r = run_ampt({"tokenize", "--tokenizer", ampt::test::gpt2_ranks_path(), "--out", out,
                           "--text_field", "body", dir + "/in", dir + "/c.txt"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::StartsWith("wrote " + out + ": 5 documents, "));
  CHECK_THAT(r.out, Catch::Contains(" from 3 files ("));
  const auto check = run_process({AMPT_PYTHON, AMPT_SOURCE_DIR "/tests/commands/token_shard_reference.py",
                                  ampt::test::gpt2_ranks_path(), out, "body", dir + "/in/a.txt",
                                  dir + "/in/b.jsonl", dir + "/c.txt"});
  INFO(check.out << check.err);
  CHECK(check.exit_code == 0);
  CHECK_THAT(check.out, Catch::StartsWith("ok 5 "));
  // The same count in ampt's own line.
  const auto tokens = check.out.substr(check.out.rfind(' ') + 1);
  CHECK_THAT(r.out, Catch::Contains("5 documents, " + tokens.substr(0, tokens.find('\n')) + " tokens"));
}

TEST_CASE("tokenize: bad arguments and inputs are one-line errors", "[commands][tokenize][errors]") {
  const auto dir = make_temp_dir();
  write_file(dir + "/a.txt", "text");
  write_file(dir + "/toy.tiktoken", ampt::test::toy_tiktoken());
  const auto error_line = [](const ampt::test::ProcessResult& r, int status, const std::string& what) {
    INFO(r.out << r.err);
    CHECK(r.exit_code == status);
    CHECK(r.err == "ampt: error: " + what + "\n");
  };
  error_line(run_ampt({"tokenize", "--out", dir + "/o.bin", dir + "/a.txt"}), 2,
             "ampt tokenize needs --tokenizer; see ampt tokenize --help");
  error_line(run_ampt({"tokenize", "--tokenizer", dir + "/toy.tiktoken", dir + "/a.txt"}), 2,
             "ampt tokenize needs --out; see ampt tokenize --help");
  error_line(run_ampt({"tokenize", "--tokenizer", dir + "/toy.tiktoken", "--out", dir + "/o.bin"}), 2,
             "ampt tokenize needs INPUT files: ampt tokenize --tokenizer PATH --out FILE INPUT...");
  error_line(run_ampt({"tokenize", "--tokenizer", dir + "/toy.tiktoken", "--out", dir + "/o.bin",
                       "--text_feild", "x", dir + "/a.txt"}),
             2, "unknown tokenize argument '--text_feild' (did you mean '--text_field'?)");
  error_line(run_ampt({"tokenize", "--tokenizer", dir + "/toy.tiktoken", "--out", dir + "/o.bin",
                       "--threads", "-1", dir + "/a.txt"}),
             2, "invalid value '-1' for --threads: expected an integer >= 0");
  error_line(run_ampt({"tokenize", "--tokenizer", dir + "/absent", "--out", dir + "/o.bin", dir + "/a.txt"}),
             1, dir + "/absent: tokenizer not found");
  error_line(run_ampt({"tokenize", "--tokenizer", dir + "/toy.tiktoken", "--out", dir + "/o.bin",
                       dir + "/missing.txt"}),
             1, dir + "/missing.txt: cannot open: No such file or directory");
  CHECK_FALSE(std::filesystem::exists(dir + "/o.bin"));
}
