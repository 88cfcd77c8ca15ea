// The checkpoint file: PyTorch's zip container written by ampt's own writer, which Python's
// zipfile verifies and torch.load reads, read back in place; and checkpoints from before that
// writer (torch::pickle_save) still resume.
#include "ampt/checkpoint/checkpoint.h"
#include "ampt/checkpoint/crc32.h"
#include "ampt/checkpoint/tensor_archive.h"

#include "support/process.h"

#include <catch2/catch.hpp>
#include <torch/serialize.h>
#include <torch/torch.h>

#include <filesystem>

namespace {

// Values Python can rebuild: arange in the dtype, shaped.
torch::Tensor tensor_pattern(torch::ScalarType dtype, std::vector<int64_t> shape, int64_t start) {
  int64_t numel = 1;
  for (auto d : shape) numel *= d;
  return torch::arange(start, start + numel, torch::kInt64).reshape(shape).to(dtype);
}

std::vector<std::pair<std::string, torch::Tensor>> sample_tensors() {
  return {{"f32", tensor_pattern(torch::kFloat32, {3, 70}, 0)},
          {"bf16", tensor_pattern(torch::kBFloat16, {5}, 100)},
          {"i64", tensor_pattern(torch::kInt64, {2, 2, 2}, -4)},
          {"u8", tensor_pattern(torch::kUInt8, {33}, 7)},
          {"scalar", tensor_pattern(torch::kFloat64, {}, 42)},
          {"empty", tensor_pattern(torch::kFloat32, {0, 4}, 0)}};
}

std::string write_sample(const std::string& path) {
  ampt::checkpoint::TensorArchiveWriter writer(path);
  c10::impl::GenericDict tensors(c10::StringType::get(), c10::AnyType::get());
  for (const auto& [name, tensor] : sample_tensors()) {
    writer.add(tensor);
    tensors.insert(name, tensor);
  }
  c10::impl::GenericDict root(c10::StringType::get(), c10::AnyType::get());
  root.insert("tensors", tensors);
  root.insert("text", std::string("ampt"));
  root.insert("number", 1.5);
  root.insert("count", int64_t{7});
  writer.finish(root);
  return path;
}

}  // namespace

TEST_CASE("tensor archive: every dtype reads back equal, in place and 64-byte aligned", "[checkpoint][format]") {
  const auto path = write_sample(ampt::test::make_temp_dir() + "/sample.pt");
  const auto root = ampt::checkpoint::read_tensor_archive(path).toGenericDict();
  CHECK(root.at("text").toStringRef() == "ampt");
  CHECK(root.at("number").toDouble() == 1.5);
  CHECK(root.at("count").toInt() == 7);
  const auto tensors = root.at("tensors").toGenericDict();
  for (const auto& [name, expected] : sample_tensors()) {
    INFO(name);
    const auto t = tensors.at(name).toTensor();
    CHECK(t.scalar_type() == expected.scalar_type());
    CHECK(t.sizes() == expected.sizes());
    CHECK(torch::equal(t, expected));
    if (t.numel() > 0) CHECK(reinterpret_cast<uintptr_t>(t.data_ptr()) % 64 == 0);
  }
}

TEST_CASE("tensor archive: zipfile verifies it and torch.load reads it, with and without mmap", "[checkpoint][format][python]") {
  const auto path = write_sample(ampt::test::make_temp_dir() + "/sample.pt");
  const auto r = ampt::test::run_process(
      {AMPT_PYTHON, "-c",
       "import sys, zipfile, torch\n"
       "archive = zipfile.ZipFile(sys.argv[1])\n"
       "assert archive.testzip() is None\n"  // every record's CRC-32 matches its bytes
       "for info in archive.infolist(): assert info.compress_type == zipfile.ZIP_STORED\n"
       "def arange(dtype, shape, start):\n"
       "    n = 1\n"
       "    for d in shape: n *= d\n"
       "    return torch.arange(start, start + n, dtype=torch.int64).reshape(shape).to(dtype)\n"
       "expected = {'f32': arange(torch.float32, (3, 70), 0), 'bf16': arange(torch.bfloat16, (5,), 100),\n"
       "            'i64': arange(torch.int64, (2, 2, 2), -4), 'u8': arange(torch.uint8, (33,), 7),\n"
       "            'scalar': arange(torch.float64, (), 42), 'empty': arange(torch.float32, (0, 4), 0)}\n"
       "for mmap in (False, True):\n"
       "    root = torch.load(sys.argv[1], weights_only=True, mmap=mmap)\n"
       "    assert root['text'] == 'ampt' and root['number'] == 1.5 and root['count'] == 7, root\n"
       "    tensors = root['tensors']\n"
       "    assert sorted(tensors) == sorted(expected), sorted(tensors)\n"
       "    for name, t in expected.items():\n"
       "        assert tensors[name].dtype == t.dtype and torch.equal(tensors[name], t), name\n"
       "print('ok')\n",
       path});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "ok\n");
}

TEST_CASE("tensor archive: a tensor whose record is too short is refused", "[checkpoint][format]") {
  const auto dir = ampt::test::make_temp_dir();
  // The record holds 10 floats; the pickle, written after it, says the storage has 100.
  ampt::checkpoint::TensorArchiveWriter writer(dir + "/short.pt");
  const auto record = torch::zeros({10});
  writer.add(record);
  auto* storage = record.storage().unsafeGetStorageImpl();
  storage->set_nbytes(400);
  writer.finish(c10::IValue(record));
  storage->set_nbytes(40);
  CHECK_THROWS_WITH(ampt::checkpoint::read_tensor_archive(dir + "/short.pt"),
                    Catch::Contains("record is shorter than the tensor"));
}

TEST_CASE("checkpoints written by torch::pickle_save (ampt before its own writer) still resume", "[checkpoint][format]") {
  const auto dir = ampt::test::make_temp_dir();
  const std::vector<std::string> run = {"train",       "--output_dir", dir,   "--device",
                                        "cpu",         "--mlp_hidden", "32",  "--batch_size",
                                        "32",          "--synthetic_samples", "512"};
  auto args = run;
  args.insert(args.end(), {"--max_steps", "10"});
  REQUIRE(ampt::test::run_ampt(args).exit_code == 0);

  // The file as the earlier writer made it: one type-tagged dictionary through pickle_save,
  // with the same checksum over names and tensors.
  const auto c = ampt::checkpoint::load(dir + "/ckpt-00000010.pt");
  c10::impl::GenericDict root(c10::StringType::get(), c10::AnyType::get());
  uint32_t crc = 0;
  const auto tagged = [&crc](const ampt::NamedTensors& tensors) {
    c10::Dict<std::string, torch::Tensor> dict;
    for (const auto& [name, tensor] : tensors) {
      crc = ampt::checkpoint::crc32(crc, name.data(), name.size());
      crc = ampt::checkpoint::crc32(crc, tensor.data_ptr(), tensor.nbytes());
      dict.insert(name, tensor.clone());
    }
    return dict;
  };
  root.insert("format", std::string("ampt-checkpoint"));
  root.insert("format_version", int64_t{1});
  for (const auto* key : {"ampt_version", "git_revision", "config", "optimizer_kind"}) {
    root.insert(key, std::string(key == std::string("optimizer_kind") ? c.optimizer_kind : "0.1.0"));
  }
  root.insert("step", c.step);
  root.insert("data_epoch", c.data_epoch);
  root.insert("data_position", c.data_position);
  root.insert("skipped_steps", c.skipped_steps);
  root.insert("initial_loss", c.initial_loss);
  root.insert("model", tagged(c.model));
  root.insert("optimizer", tagged(c.optimizer));
  root.insert("cpu_rng", c.cpu_rng.clone());
  crc = ampt::checkpoint::crc32(crc, c.cpu_rng.data_ptr(), c.cpu_rng.nbytes());
  root.insert("checksum", static_cast<int64_t>(crc));
  const auto bytes = torch::pickle_save(root);
  const auto legacy = dir + "/legacy.pt";
  ampt::test::write_file(legacy, std::string(bytes.begin(), bytes.end()));

  const auto loaded = ampt::checkpoint::load(legacy);
  REQUIRE(loaded.model.size() == c.model.size());
  for (size_t i = 0; i < c.model.size(); ++i) CHECK(torch::equal(loaded.model[i].second, c.model[i].second));
  args = run;
  args.insert(args.end(), {"--max_steps", "12", "--resume", legacy});
  const auto resumed = ampt::test::run_ampt(args);
  INFO(resumed.out << resumed.err);
  CHECK(resumed.exit_code == 0);
  CHECK_THAT(resumed.out, Catch::Contains("Resumed from " + legacy + " at step 10"));
}
