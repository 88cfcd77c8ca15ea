// The files of record data as users have them: datasets' save_to_disk directories (one dataset,
// or a DatasetDict's splits), a Hub snapshot's data/<split>-*.parquet and refs/convert/parquet's
// <config>/<split>/*.parquet, splits read from file names as datasets reads them, and a Hub
// directory's test split used for validation; every layout that cannot be read is one line.
#include "ampt/core/errors.h"
#include "ampt/data/dataset_files.h"
#include "ampt/data/registry.h"
#include "data/data_fixtures.h"
#include "support/process.h"
#include "support/python_modules.h"
#include "support/skip.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

using namespace ampt::data;
using ampt::config::DatasetKind;
using ampt::test::make_temp_dir;
using ampt::test::run_process;
using ampt::test::write_file;

namespace {

// Files that only need to be there (their bytes are not read: no table magic).
void touch(const std::string& root, const std::vector<std::string>& files) {
  for (const auto& file : files) {
    std::filesystem::create_directories(std::filesystem::path(root + "/" + file).parent_path());
    write_file(root + "/" + file, "x");
  }
}

std::vector<std::string> under(const std::string& root, const std::vector<std::string>& files) {
  std::vector<std::string> out;
  for (const auto& file : files) out.push_back(root + "/" + file);
  return out;
}

}  // namespace

TEST_CASE("dataset files: save_to_disk directories, Hub layouts and their splits", "[data][tables]") {
  SECTION("a save_to_disk Dataset: its Arrow files in state.json's order") {
    const auto dir = make_temp_dir();
    touch(dir, {"data-00000-of-00002.arrow", "data-00001-of-00002.arrow"});
    write_file(dir + "/state.json", R"({"_data_files": [{"filename": "data-00001-of-00002.arrow"},)"
                                    R"( {"filename": "data-00000-of-00002.arrow"}], "_split": null})");
    const auto files = dataset_files(dir, DatasetKind::arrow);
    CHECK(files.train == under(dir, {"data-00001-of-00002.arrow", "data-00000-of-00002.arrow"}));
    CHECK(files.validation.empty());
  }
  SECTION("a save_to_disk DatasetDict: train, and test for validation") {
    const auto dir = make_temp_dir();
    touch(dir, {"train/data-00000-of-00001.arrow", "test/data-00000-of-00001.arrow"});
    write_file(dir + "/dataset_dict.json", R"({"splits": ["train", "test"]})");
    for (const auto* split : {"train", "test"}) {
      write_file(dir + "/" + split + "/state.json", R"({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]})");
    }
    const auto files = dataset_files(dir, DatasetKind::arrow);
    CHECK(files.train == under(dir, {"train/data-00000-of-00001.arrow"}));
    CHECK(files.validation == under(dir, {"test/data-00000-of-00001.arrow"}));
    CHECK(files.validation_split == "test");
  }
  SECTION("a Hub snapshot: data/<split>-*.parquet, validation before test") {
    const auto dir = make_temp_dir();
    touch(dir, {"README.md", "data/train-00000-of-00002.parquet", "data/train-00001-of-00002.parquet",
                "data/validation-00000-of-00001.parquet", "data/test-00000-of-00001.parquet"});
    const auto files = dataset_files(dir, DatasetKind::parquet);
    CHECK(files.train == under(dir, {"data/train-00000-of-00002.parquet", "data/train-00001-of-00002.parquet"}));
    CHECK(files.validation == under(dir, {"data/validation-00000-of-00001.parquet"}));
    CHECK(files.validation_split == "validation");
  }
  SECTION("refs/convert/parquet: <config>/<split>/NNNN.parquet") {
    const auto dir = make_temp_dir();
    touch(dir, {"default/train/0000.parquet", "default/train/0001.parquet", "default/test/0000.parquet"});
    const auto files = dataset_files(dir, DatasetKind::parquet);
    CHECK(files.train == under(dir, {"default/train/0000.parquet", "default/train/0001.parquet"}));
    CHECK(files.validation == under(dir, {"default/test/0000.parquet"}));
  }
  SECTION("files of no split are all train; a file or glob is as named") {
    const auto dir = make_temp_dir();
    touch(dir, {"b.jsonl", "a.jsonl", "notes.txt"});
    CHECK(dataset_files(dir, DatasetKind::jsonl).train == under(dir, {"a.jsonl", "b.jsonl"}));
    CHECK(dataset_files(dir + "/b.jsonl", DatasetKind::jsonl).train == under(dir, {"b.jsonl"}));
    CHECK(dataset_files(dir + "/*.jsonl", DatasetKind::jsonl).train == under(dir, {"a.jsonl", "b.jsonl"}));
  }
  SECTION("layouts that cannot be read: one line each") {
    const auto configs = make_temp_dir();
    touch(configs, {"main/train-00000-of-00001.parquet", "socratic/train-00000-of-00001.parquet"});
    CHECK_THROWS_WITH(dataset_files(configs, DatasetKind::parquet),
                      configs + ": holds the dataset configs main, socratic: name one, such as " + configs + "/main");
    const auto test_only = make_temp_dir();
    touch(test_only, {"data/test-00000-of-00001.parquet"});
    CHECK_THROWS_WITH(dataset_files(test_only, DatasetKind::parquet),
                      test_only + ": its files are of the test split and none of train: name a file to train on");
    const auto none = make_temp_dir();
    touch(none, {"a.jsonl"});
    CHECK_THROWS_WITH(dataset_files(none, DatasetKind::parquet),
                      none + ": no *.parquet file in the directory or below it");
    const auto state = make_temp_dir();
    write_file(state + "/state.json", R"({"_fingerprint": "x"})");
    CHECK_THROWS_WITH(dataset_files(state, DatasetKind::arrow),
                      state + "/state.json: no \"_data_files\" list of {\"filename\": ...}: not a state.json "
                              "datasets' save_to_disk writes");
  }
}

TEST_CASE("dataset files: a Hub directory trains on its train split and validates on its test split, "
          "and files of two schemas are one line",
          "[data][tables][reference]") {
  if (!ampt::test::python_has("datasets, pyarrow")) {
    AMPT_SKIP(reference, "skipping: datasets and pyarrow are not installed in " AMPT_PYTHON);
  }
  const auto dir = make_temp_dir();
  const auto r = run_process({AMPT_PYTHON, AMPT_SOURCE_DIR "/tests/tables/datasets_reference.py", "make", dir});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  ampt::config::Config config;
  config.dataset = "parquet:" + dir + "/hub";
  config.tokenizer = dir + "/toy.tiktoken";
  write_file(config.tokenizer, ampt::test::toy_tiktoken());
  config.output_dir = dir + "/out";
  config.packing = false;
  const auto splits = open_dataset(config, {SampleRequest::Form::tokens, 48, 300});
  CHECK(splits.train->size() == 6);
  REQUIRE(splits.val != nullptr);
  CHECK(splits.val->size() == 1);
  CHECK_THAT(splits.description, Catch::Contains("6 plain examples") &&
                                     Catch::Contains("; validation: the data's test split (1 file, 1 plain example") &&
                                     Catch::Contains("train 6 / val 1 examples"));

  const auto mixed = make_temp_dir();
  std::filesystem::copy_file(dir + "/text/train-00000-of-00002.parquet", mixed + "/a.parquet");
  std::filesystem::copy_file(dir + "/messages/train-00001-of-00002.parquet", mixed + "/b.parquet");
  CHECK_THROWS_WITH(dataset_files(mixed, DatasetKind::parquet),
                    mixed + "/b.parquet: its columns (messages: list<element: struct<role: string, content: "
                            "string>>) are not those of " + mixed + "/a.parquet (text: string, id: int64): the "
                            "files of a dataset share one schema");
}
