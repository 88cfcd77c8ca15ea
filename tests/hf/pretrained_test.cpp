// --init_from's files: a directory as given, or a name found offline in the Hugging Face hub cache.
#include "ampt/hf/pretrained.h"
#include "ampt/hf/hub_cache.h"

#include "ampt/core/errors.h"
#include "support/process.h"

#include <catch2/catch.hpp>

#include <filesystem>

using ampt::hf::model_files;
using ampt::hf::pretrained_dir;
using ampt::test::make_temp_dir;
using ampt::test::write_file;

namespace {

// A cached repository as huggingface_hub lays it out, with one snapshot per revision.
std::string cached_snapshot(const std::string& cache, const std::string& folder,
                            const std::string& revision, bool main_ref) {
  const auto repo = cache + "/" + folder;
  const auto snapshot = repo + "/snapshots/" + revision;
  write_file(snapshot + "/config.json", "{}");
  if (main_ref) write_file(repo + "/refs/main", revision + "\n");
  return snapshot;
}

}  // namespace

TEST_CASE("hf: a name is found in the hub cache, under openai-community/ too",
          "[hf][pretrained]") {
  const auto cache = make_temp_dir();
  const auto old = cached_snapshot(cache, "models--openai-community--gpt2", "aaa", false);
  const auto current = cached_snapshot(cache, "models--openai-community--gpt2", "bbb", true);
  CHECK(pretrained_dir("gpt2", cache) == current);  // refs/main wins over other snapshots
  const auto medium = cached_snapshot(cache, "models--gpt2-medium", "ccc", false);
  CHECK(pretrained_dir("gpt2-medium", cache) == medium);  // the only snapshot, no refs
  const auto own = cached_snapshot(cache, "models--me--tiny-gpt", "ddd", true);
  CHECK(pretrained_dir("me/tiny-gpt", cache) == own);
  // A directory is taken as it is, cache or not.
  CHECK(pretrained_dir(old, "") == old);
}

TEST_CASE("hf: a name the cache lacks says where it looked and that nothing is downloaded",
          "[hf][pretrained]") {
  const auto cache = make_temp_dir();
  CHECK_THROWS_WITH(pretrained_dir("gpt2-xl", cache),
                    "init_from 'gpt2-xl' is not a directory, and the Hugging Face cache " + cache +
                        " has no snapshot of it (looked for models--gpt2-xl and "
                        "models--openai-community--gpt2-xl); ampt never downloads: fetch it where "
                        "there is network access (huggingface-cli download "
                        "openai-community/gpt2-xl) and copy the cache or the model's directory "
                        "here");
  CHECK_THROWS_WITH(pretrained_dir("gpt2", ""),
                    Catch::Contains("the Hugging Face cache (none: HF_HUB_CACHE, HF_HOME and HOME "
                                    "are unset)"));
  // A file, most often an ampt checkpoint, is not sent to the cache.
  const auto checkpoint = cache + "/ckpt-00000050.pt";
  ampt::test::write_file(checkpoint, "not read");
  CHECK_THROWS_WITH(pretrained_dir(checkpoint, cache),
                    "init_from '" + checkpoint + "' is a file, not a model directory: an ampt "
                    "checkpoint continues its own run with --resume " + checkpoint + ", or becomes a "
                    "model directory with `ampt export --checkpoint " + checkpoint + " --format hf "
                    "--out DIR` for init_from DIR");
}

TEST_CASE("hf: model files are config.json with model.safetensors or a sharded index",
          "[hf][pretrained]") {
  const auto dir = make_temp_dir();
  CHECK_THROWS_WITH(model_files(dir), dir + "/config.json: missing; a Hugging Face model "
                                            "directory has a config.json beside its weights");
  write_file(dir + "/config.json", "{}");
  CHECK_THROWS_WITH(model_files(dir),
                    dir + ": no model.safetensors or model.safetensors.index.json");
  write_file(dir + "/pytorch_model.bin", "pickle");
  CHECK_THROWS_WITH(model_files(dir), Catch::StartsWith(dir + "/pytorch_model.bin: a pickle, "
                                                              "which ampt does not load") &&
                                          Catch::Contains("save_pretrained('" + dir +
                                                          "', safe_serialization=True)"));
  write_file(dir + "/model.safetensors.index.json",
             R"({"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors",)"
             R"( "b": "model-00002-of-00002.safetensors"}})");
  write_file(dir + "/model-00001-of-00002.safetensors", "");
  CHECK_THROWS_WITH(model_files(dir), dir + "/model-00002-of-00002.safetensors: missing, but " +
                                          dir + "/model.safetensors.index.json lists it");
  write_file(dir + "/model-00002-of-00002.safetensors", "");
  CHECK(model_files(dir).weights == std::vector<std::string>{
                                        dir + "/model-00001-of-00002.safetensors",
                                        dir + "/model-00002-of-00002.safetensors"});
  write_file(dir + "/model.safetensors", "");
  CHECK(model_files(dir).weights == std::vector<std::string>{dir + "/model.safetensors"});
}
