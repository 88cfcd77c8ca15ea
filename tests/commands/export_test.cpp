// `ampt export` writes safetensors that an independent reader and Python's safetensors load.
#include "ampt/checkpoint/checkpoint.h"

#include "support/process.h"
#include "support/skip.h"
#include "support/python_modules.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <cstring>
#include <filesystem>
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
