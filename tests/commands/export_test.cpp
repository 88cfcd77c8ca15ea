// `ampt export` writes safetensors that an independent reader and Python's safetensors load.
#include "ampt/checkpoint/checkpoint.h"

#include "support/process.h"
#include "support/skip.h"
#include "support/python_modules.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <regex>

using ampt::test::read_file;
using ampt::test::run_ampt;

namespace {

struct Entry {
  std::string dtype;
  std::vector<int64_t> shape;
  int64_t begin = 0;
  int64_t end = 0;
};

// A reader written from the format's description, sharing no code with the writer.
std::map<std::string, Entry> read_header(const std::string& file, size_t& data_start) {
  REQUIRE(file.size() >= 8);
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<unsigned char>(file[i]);
  REQUIRE(8 + length <= file.size());
  CHECK(length % 8 == 0);
  data_start = 8 + length;
  const std::string header = file.substr(8, length);
  std::map<std::string, Entry> entries;
  const std::regex entry(
      R"re("([^"]+)":\{"dtype":"([A-Z0-9]+)","shape":\[([0-9,]*)\],"data_offsets":\[([0-9]+),([0-9]+)\]\})re");
  for (std::sregex_iterator it(header.begin(), header.end(), entry), end; it != end; ++it) {
    Entry e{(*it)[2], {}, std::stoll((*it)[4]), std::stoll((*it)[5])};
    std::stringstream dims((*it)[3]);
    for (std::string d; std::getline(dims, d, ',');) e.shape.push_back(std::stoll(d));
    entries[(*it)[1]] = e;
  }
  return entries;
}

std::string trained_checkpoint() {
  const auto dir = ampt::test::make_temp_dir();
  const auto r = run_ampt({"train", "--output_dir", dir, "--device", "cpu", "--max_steps", "5",
                           "--synthetic_samples", "512", "--mlp_hidden", "24", "--batch_size", "32"});
  REQUIRE(r.exit_code == 0);
  return dir + "/ckpt-00000005.pt";
}

}  // namespace

TEST_CASE("export: safetensors holds every model tensor, bit-exact in fp32", "[checkpoint][export]") {
  const auto checkpoint = trained_checkpoint();
  const auto out = ampt::test::make_temp_dir() + "/model.safetensors";
  const auto r = run_ampt({"export", "--checkpoint", checkpoint, "--format", "safetensors", "--out", out});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::StartsWith("wrote 8 tensors (fp32)"));

  const auto saved = ampt::checkpoint::load(checkpoint);
  const auto file = read_file(out);
  size_t data_start = 0;
  const auto entries = read_header(file, data_start);
  CHECK(entries.size() == saved.model.size());
  for (const auto& [name, tensor] : saved.model) {
    INFO(name);
    REQUIRE(entries.count(name) == 1);
    const auto& e = entries.at(name);
    CHECK(e.dtype == "F32");
    CHECK(e.shape == tensor.sizes().vec());
    REQUIRE(e.end - e.begin == static_cast<int64_t>(tensor.nbytes()));
    CHECK(std::memcmp(file.data() + data_start + e.begin, tensor.contiguous().data_ptr(),
                      tensor.nbytes()) == 0);
  }
}

TEST_CASE("export: --dtype bf16 rounds the weights to bfloat16", "[checkpoint][export]") {
  const auto checkpoint = trained_checkpoint();
  const auto out = ampt::test::make_temp_dir() + "/model.bf16.safetensors";
  REQUIRE(run_ampt({"export", "--checkpoint", checkpoint, "--out", out, "--dtype", "bf16"}).exit_code == 0);
  const auto saved = ampt::checkpoint::load(checkpoint);
  const auto file = read_file(out);
  size_t data_start = 0;
  const auto entries = read_header(file, data_start);
  const auto& [name, tensor] = saved.model.front();
  const auto& e = entries.at(name);
  CHECK(e.dtype == "BF16");
  const auto expected = tensor.to(torch::kBFloat16).contiguous();
  REQUIRE(e.end - e.begin == static_cast<int64_t>(expected.nbytes()));
  CHECK(std::memcmp(file.data() + data_start + e.begin, expected.data_ptr(), expected.nbytes()) == 0);
}

TEST_CASE("export: Python's safetensors and torch load the file", "[checkpoint][export][python]") {
  if (!ampt::test::python_has("safetensors")) {
    AMPT_SKIP(reference, "skipping: Python safetensors is not installed in " AMPT_PYTHON);
  }
  const auto checkpoint = trained_checkpoint();
  const auto out = ampt::test::make_temp_dir() + "/model.safetensors";
  REQUIRE(run_ampt({"export", "--checkpoint", checkpoint, "--out", out}).exit_code == 0);
  // Python reads both files: the safetensors export and the checkpoint itself (torch.load).
  const auto r = ampt::test::run_process(
      {AMPT_PYTHON, "-c",
       "import sys, torch\n"
       "from safetensors.torch import load_file\n"
       "exported = load_file(sys.argv[1])\n"
       "model = torch.load(sys.argv[2], weights_only=True)['model']\n"
       "assert sorted(exported) == sorted(model), (sorted(exported), sorted(model))\n"
       "for name in model: assert torch.equal(exported[name], model[name]), name\n"
       "print('equal', len(model))\n",
       out, checkpoint});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "equal 8\n");
}

TEST_CASE("export: bad arguments are one-line usage errors", "[checkpoint][export][errors]") {
  auto r = run_ampt({"export", "--out", "x.safetensors"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("ampt export needs --checkpoint"));
  r = run_ampt({"export", "--checkpoint", "a.pt", "--out", "b", "--format", "onnx"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("invalid value 'onnx' for format (flag --format): expected one of safetensors, hf"));
  r = run_ampt({"export", "--checkpoint", "a.pt", "--out", "b", "--dtpye", "bf16"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("unknown flag '--dtpye' (did you mean '--dtype'?)"));
  r = run_ampt({"export", "--checkpoint", "/nonexistent/a.pt", "--out", "b"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("checkpoint '/nonexistent/a.pt' not found"));
}

namespace {

// Runs ampt with each file it writes limited to `kib` KiB (RLIMIT_FSIZE, what `ulimit -f` or a
// quota sets) and SIGXFSZ ignored, so that a write past the limit fails with EFBIG, as one past
// a full disk fails with ENOSPC, rather than killing the process.
ampt::test::ProcessResult run_ampt_limited(int kib, const std::vector<std::string>& args) {
  std::vector<std::string> argv{"/bin/bash", "-c", "trap '' XFSZ; ulimit -f " + std::to_string(kib) + "; exec \"$@\"",
                                "bash", AMPT_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  return ampt::test::run_process(argv);
}

// One step of a one-block GPT on synthetic tokens, without a tokenizer, with `flags`.
std::string gpt_checkpoint(const std::vector<std::string>& flags) {
  const auto dir = ampt::test::make_temp_dir();
  std::vector<std::string> args{"train", "--model", "gpt", "--n_layer", "1", "--block_size", "16",
                                "--synthetic_samples", "64", "--batch_size", "4", "--max_steps", "1",
                                "--device", "cpu", "--output_dir", dir};
  args.insert(args.end(), flags.begin(), flags.end());
  const auto r = run_ampt(args);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return dir + "/ckpt-00000001.pt";
}

// Every file under `dir` with its size and a hash of its bytes: what must not change when an
// export fails.
std::map<std::string, std::string> contents(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    std::string summary = "(directory)";
    if (entry.is_regular_file()) {
      const auto bytes = read_file(entry.path().string());
      summary = std::to_string(bytes.size()) + " bytes, hash " + std::to_string(std::hash<std::string>{}(bytes));
    }
    files[entry.path().string().substr(dir.size() + 1)] = summary;
  }
  return files;
}

// The one line a failed export prints.
void check_failed(const ampt::test::ProcessResult& r, const std::string& out, const std::string& why) {
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK_THAT(r.err, Catch::StartsWith("ampt: error: export to " + out + " failed and left it as it was: ") &&
                        Catch::Contains(why));
}

}  // namespace

TEST_CASE("export: a hf export that fails after the weights leaves nothing, and an earlier one as it was",
          "[checkpoint][export][atomic]") {
  if (!std::filesystem::exists(AMPT_SOURCE_DIR "/.deps/gpt2.tiktoken")) {
    AMPT_SKIP(reference, "skipping: .deps/gpt2.tiktoken (scripts/bootstrap.sh) missing");
  }
  const std::string ranks = AMPT_SOURCE_DIR "/.deps/gpt2.tiktoken";
  const auto checkpoint = gpt_checkpoint({"--n_embd", "8", "--n_head", "2", "--vocab_size", "50304"});
  const auto parent = ampt::test::make_temp_dir();
  // model.safetensors is 1.6 MB (50304 rows of 8 fp32) and fits under 2 MiB; the tokenizer.json
  // written from GPT-2's ranks is 2.7 MB and does not: the failure comes after the weights and
  // config.json are complete in the temporary directory.
  const auto deep = parent + "/new/deeper/hf";
  auto r = run_ampt_limited(2048, {"export", "--format", "hf", "--checkpoint", checkpoint, "--out", deep,
                                   "--tokenizer", ranks});
  check_failed(r, deep, "tokenizer.json': File too large (EFBIG)");
  CHECK(ampt::test::entries(parent).empty());  // nor the parents it made, nor a temporary

  const auto out = parent + "/hf";
  r = run_ampt({"export", "--format", "hf", "--checkpoint", checkpoint, "--out", out, "--tokenizer", ranks});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto before = contents(parent);
  CHECK(before.count("hf/tokenizer.json") == 1);
  r = run_ampt_limited(2048, {"export", "--format", "hf", "--checkpoint", checkpoint, "--out", out,
                              "--tokenizer", ranks});
  check_failed(r, out, "tokenizer.json': File too large (EFBIG)");
  CHECK(contents(parent) == before);

  SECTION("a new export replaces an earlier one whole") {
    r = run_ampt({"export", "--format", "hf", "--checkpoint", checkpoint, "--out", out});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(ampt::test::entries(parent) == std::vector<std::string>{"hf"});
    CHECK(ampt::test::entries(out) == std::vector<std::string>{"config.json", "model.safetensors"});
  }
  SECTION("a directory holding what no export writes is refused, and left as it was") {
    ampt::test::write_file(out + "/notes.md", "mine");
    const auto mine = contents(parent);
    r = run_ampt({"export", "--format", "hf", "--checkpoint", checkpoint, "--out", out});
    CHECK(r.exit_code == 2);
    CHECK(r.err == "ampt: error: " + out + " holds notes.md, which no export writes: an export replaces "
                   "its directory whole, so name a new directory or an earlier export\n");
    CHECK(contents(parent) == mine);
  }
  SECTION("nor is the run's init_from replaced") {
    const auto run = parent + "/run";
    r = run_ampt({"train", "--init_from", out, "--block_size", "16", "--synthetic_samples", "64",
                  "--batch_size", "4", "--max_steps", "1", "--device", "cpu", "--output_dir", run});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    const auto kept = contents(out);
    r = run_ampt({"export", "--format", "hf", "--checkpoint", run + "/ckpt-00000001.pt", "--out", out});
    CHECK(r.exit_code == 2);
    CHECK(r.err == "ampt: error: --out " + out + " is the run's init_from directory (" + out +
                       "): an export replaces its directory whole; name a new one\n");
    CHECK(contents(out) == kept);
  }
}

TEST_CASE("export: a peft or safetensors export that fails leaves nothing", "[checkpoint][export][atomic]") {
  const auto parent = ampt::test::make_temp_dir();
  // The adapters (rank 4 on c_attn of a block 32 wide: 2 KiB of fp32) do not fit in 1 KiB.
  const auto peft = parent + "/peft";
  const auto lora = gpt_checkpoint({"--n_embd", "32", "--n_head", "4", "--vocab_size", "64", "--lora_rank", "4"});
  check_failed(run_ampt_limited(1, {"export", "--format", "peft", "--checkpoint", lora, "--out", peft}), peft,
               "adapter_model.safetensors': File too large (EFBIG)");
  CHECK(ampt::test::entries(parent).empty());
  const auto file = parent + "/model.safetensors";
  check_failed(run_ampt_limited(1, {"export", "--checkpoint", trained_checkpoint(), "--out", file}), file,
               "File too large (EFBIG)");
  CHECK(ampt::test::entries(parent).empty());
}
