#include "ampt/data/registry.h"

#include "ampt/config/dataset_spec.h"
#include "ampt/core/errors.h"
#include "ampt/data/cifar.h"
#include "ampt/data/idx.h"
#include "ampt/data/seed.h"
#include "ampt/data/split.h"
#include "ampt/data/synthetic.h"
#include "ampt/data/synthetic_images.h"
#include "ampt/data/synthetic_tokens.h"
#include "ampt/data/tensor_dataset.h"
#include "ampt/data/text_file.h"
#include "ampt/data/token_file.h"
#include "ampt/data/token_windows.h"

#include <fmt/format.h>
#include <glob.h>

#include <filesystem>
#include <set>
#include <stdexcept>

namespace ampt::data {
namespace {

namespace fs = std::filesystem;
using config::Config;

// Independent random streams drawn from the one run seed.
constexpr uint64_t kSplitStream = 1;
constexpr uint64_t kLoaderStream = 2;

std::string human_count(int64_t n) {
  if (n >= 1'000'000'000) return fmt::format("{:.2f}B", static_cast<double>(n) / 1e9);
  if (n >= 1'000'000) return fmt::format("{:.2f}M", static_cast<double>(n) / 1e6);
  if (n >= 10'000) return fmt::format("{:.1f}K", static_cast<double>(n) / 1e3);
  return std::to_string(n);
}

// The sample counts of the split, ending every description the same way.
std::string split_counts(const DataSplits& splits, std::string_view unit) {
  return fmt::format("train {} / val {} {}", human_count(splits.train->size()),
                     splits.val ? human_count(splits.val->size()) : "none", unit);
}

DataSplits held_out(std::shared_ptr<const Dataset> all, DataSpec spec, const Config& config) {
  auto [train, val] = split_dataset(std::move(all), config.val_fraction,
                                    mix_seed(static_cast<uint64_t>(config.seed), kSplitStream));
  return {std::move(spec), std::move(train), std::move(val), ""};
}

DataSpec token_spec(const SampleRequest& request) {
  return {Task::language_model, {request.block_size}, request.vocab_size};
}

DataSplits open_synthetic(const Config& config, const SampleRequest& request) {
  const auto seed = static_cast<uint64_t>(config.seed);
  switch (request.form) {
    case SampleRequest::Form::features: {
      const SyntheticClassification data(config.synthetic_samples, config.synthetic_features,
                                         config.synthetic_classes, seed);
      auto splits = held_out(std::make_shared<TensorDataset>(data.inputs, data.targets),
                             {Task::classification, {data.features}, data.classes}, config);
      splits.description = fmt::format("synthetic features: {} features, {} classes; {}",
                                       data.features, data.classes,
                                       split_counts(splits, "samples"));
      return splits;
    }
    case SampleRequest::Form::images: {
      constexpr int64_t C = SyntheticImages::kChannels, S = SyntheticImages::kSide;
      auto splits = held_out(std::make_shared<SyntheticImages>(config.synthetic_samples,
                                                               config.synthetic_classes, seed),
                             {Task::classification, {C, S, S}, config.synthetic_classes}, config);
      splits.description = fmt::format("synthetic images: {}x{}x{}, {} classes; {}", C, S, S,
                                       config.synthetic_classes, split_counts(splits, "samples"));
      return splits;
    }
    case SampleRequest::Form::tokens: {
      const int64_t tokens = config.synthetic_samples * request.block_size + 1;
      auto splits = held_out(
          std::make_shared<TokenWindows>(
              std::vector{synthetic_token_span(tokens, request.vocab_size, seed)},
              request.block_size, request.vocab_size),
          token_spec(request), config);
      splits.description = fmt::format(
          "synthetic tokens: Markov chain over {} ids, {} tokens; {}", request.vocab_size,
          human_count(tokens),
          split_counts(splits, fmt::format("windows of {}", request.block_size)));
      return splits;
    }
  }
  throw std::invalid_argument("unhandled sample form");  // unreachable: the enum is closed
}

DataSplits open_text(const std::string& path, const Config& config,
                     const SampleRequest& request) {
  auto span = open_text_file(path);
  const int64_t bytes = span.count;
  auto splits = held_out(std::make_shared<TokenWindows>(std::vector{std::move(span)},
                                                        request.block_size, request.vocab_size),
                         token_spec(request), config);
  splits.description =
      fmt::format("text:{}: {} bytes as tokens; {}", path, human_count(bytes),
                  split_counts(splits, fmt::format("windows of {}", request.block_size)));
  return splits;
}

bool is_glob(const std::string& path) { return path.find_first_of("*?[") != std::string::npos; }

// The files matching a glob(3) pattern, sorted; none is an empty list.
std::vector<std::string> glob_files(const std::string& pattern) {
  glob_t found{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &found);
  std::vector<std::string> paths(found.gl_pathv, found.gl_pathv + (rc == 0 ? found.gl_pathc : 0));
  ::globfree(&found);
  if (rc != 0 && rc != GLOB_NOMATCH) {
    throw RuntimeError(pattern + ": cannot expand the pattern (glob error " + std::to_string(rc) + ")");
  }
  return paths;
}

// The files `path` names: a plain path as is (opening it reports it missing), a glob's matches.
std::vector<std::string> expand(const std::string& path) {
  if (!is_glob(path)) return {path};
  auto paths = glob_files(path);
  if (paths.empty()) throw RuntimeError(path + ": no file matches");
  return paths;
}

struct TokenPaths {
  std::vector<std::string> train, val;
};

// nanoGPT's and llm.c's conventions: a directory holds train.bin (and val.bin); otherwise the
// validation files are the train path with its last "train" (in the file name) replaced by "val":
// train.bin -> val.bin, fineweb_train_*.bin -> fineweb_val_*.bin. No such files: no val files.
TokenPaths token_paths(const std::string& path) {
  if (fs::is_directory(path)) return token_paths((fs::path(path) / "train.bin").string());
  TokenPaths paths{expand(path), {}};
  const auto name_start = path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1;
  const auto train = path.rfind("train");
  if (train == std::string::npos || train < name_start) return paths;
  const auto val = path.substr(0, train) + "val" + path.substr(train + 5);
  if (is_glob(val)) {
    paths.val = glob_files(val);
  } else if (fs::exists(val)) {
    paths.val = {val};
  }
  return paths;
}

struct TokenShards {
  std::shared_ptr<const Dataset> windows;
  std::string summary;  // "2 files (llm.c), 1.20M tokens"
};

TokenShards open_token_shards(const std::vector<std::string>& paths, const SampleRequest& request) {
  std::vector<TokenSpan> spans;
  std::set<std::string> formats;
  int64_t tokens = 0;
  for (const auto& path : paths) {
    auto file = open_token_file(path);
    formats.insert(file.format == TokenFileFormat::llmc ? "llm.c" : "nanoGPT");
    tokens += file.span.count;
    spans.push_back(std::move(file.span));
  }
  return {std::make_shared<TokenWindows>(std::move(spans), request.block_size, request.vocab_size),
          fmt::format("{} file{} ({}), {} tokens", paths.size(), paths.size() == 1 ? "" : "s",
                      fmt::join(formats, " + "), human_count(tokens))};
}

DataSplits open_tokens(const std::string& path, const Config& config,
                       const SampleRequest& request) {
  const auto paths = token_paths(path);
  auto train = open_token_shards(paths.train, request);
  DataSplits splits;
  std::string val_summary;
  if (paths.val.empty()) {
    splits = held_out(train.windows, token_spec(request), config);
    val_summary = fmt::format("val: {} held out", config.val_fraction);
  } else {
    auto val = open_token_shards(paths.val, request);
    splits = {token_spec(request), train.windows, val.windows, ""};
    val_summary = "val: " + val.summary;
  }
  splits.description =
      fmt::format("tokens:{}: {}; {}; {}", path, train.summary, val_summary,
                  split_counts(splits, fmt::format("windows of {}", request.block_size)));
  return splits;
}

// `dir/name`, with a hint when only a gzipped copy is there (we do not link a decompressor).
std::string data_file(const std::string& dir, const std::string& name) {
  const auto path = (fs::path(dir) / name).string();
  if (!fs::exists(path) && fs::exists(path + ".gz")) {
    throw RuntimeError(path + ": missing; " + name + ".gz is there: decompress it with gunzip");
  }
  return path;
}

void check_labels(const torch::Tensor& labels, int64_t count, int64_t classes,
                  const std::string& labels_path, const std::string& images_path) {
  if (labels.size(0) != count) {
    throw RuntimeError(fmt::format("{}: {} labels but {} holds {} images", labels_path,
                                   labels.size(0), images_path, count));
  }
  if (const int64_t largest = labels.max().item<int64_t>(); largest >= classes) {
    throw RuntimeError(
        fmt::format("{}: label {} is not one of the {} classes", labels_path, largest, classes));
  }
}

// One split of an MNIST-style directory: `prefix`-images-idx3-ubyte and its labels.
Batch idx_split(const std::string& dir, const std::string& prefix) {
  const auto images_path = data_file(dir, prefix + "-images-idx3-ubyte");
  const auto labels_path = data_file(dir, prefix + "-labels-idx1-ubyte");
  Batch split{read_idx_images(images_path), read_idx_labels(labels_path)};
  check_labels(split.targets, split.inputs.size(0), 10, labels_path, images_path);
  return split;
}

DataSplits open_mnist(const std::string& kind, const std::string& dir) {
  auto train = idx_split(dir, "train");
  auto val = idx_split(dir, "t10k");
  const auto shape = train.inputs.sizes().slice(1).vec();
  if (const auto val_shape = val.inputs.sizes().slice(1).vec(); val_shape != shape) {
    throw RuntimeError(fmt::format("{}: t10k images are {} but train images {}", dir,
                                   fmt::join(val_shape, "x"), fmt::join(shape, "x")));
  }
  DataSplits splits{{Task::classification, shape, 10},
                    std::make_shared<TensorDataset>(train.inputs, train.targets),
                    std::make_shared<TensorDataset>(val.inputs, val.targets),
                    ""};
  splits.description = fmt::format("{}:{}: {} images, 10 classes; {} (t10k)", kind, dir,
                                   fmt::join(shape, "x"), split_counts(splits, "images"));
  return splits;
}

DataSplits open_cifar10(const std::string& dir) {
  std::vector<std::string> train_files;
  for (int i = 1; i <= 5; ++i) train_files.push_back(data_file(dir, fmt::format("data_batch_{}.bin", i)));
  auto train = read_cifar_batches(train_files);
  auto val = read_cifar_batches({data_file(dir, "test_batch.bin")});
  DataSplits splits{{Task::classification, {3, 32, 32}, 10},
                    std::make_shared<TensorDataset>(train.inputs, train.targets),
                    std::make_shared<TensorDataset>(val.inputs, val.targets),
                    ""};
  splits.description = fmt::format("cifar10:{}: 3x32x32 images, 10 classes; {} (test_batch)", dir,
                                   split_counts(splits, "images"));
  return splits;
}

}  // namespace

DataSplits open_dataset(const Config& config, const SampleRequest& request) {
  const auto spec = config::parse_dataset_spec(config.dataset);
  if (!spec) {
    throw UsageError(fmt::format("invalid dataset '{}': expected one of {}", config.dataset,
                                 config::kDatasetSpecExpected));
  }
  const bool tokens =
      spec->kind == config::DatasetKind::text || spec->kind == config::DatasetKind::tokens;
  if (tokens && request.form != SampleRequest::Form::tokens) {
    throw UsageError(fmt::format(
        "dataset '{}' is language-model data but the model does not take token windows",
        config.dataset));
  }
  switch (spec->kind) {
    case config::DatasetKind::synthetic: return open_synthetic(config, request);
    case config::DatasetKind::text: return open_text(spec->path, config, request);
    case config::DatasetKind::tokens: return open_tokens(spec->path, config, request);
    case config::DatasetKind::mnist: return open_mnist("mnist", spec->path);
    case config::DatasetKind::fashion_mnist: return open_mnist("fashion-mnist", spec->path);
    case config::DatasetKind::cifar10: return open_cifar10(spec->path);
  }
  throw UsageError("unhandled dataset kind in " + config.dataset);  // unreachable: enum is closed
}

LoaderOptions train_loader_options(const Config& config, const torch::Device& device) {
  LoaderOptions options;
  options.batch_size = config.batch_size;
  options.shuffle = config.data_sampling == config::Sampling::random;
  options.seed = mix_seed(static_cast<uint64_t>(config.seed), kLoaderStream);
  options.device = device;
  options.workers = config.loader_workers;
  options.prefetch = config.prefetch;
  options.name = "training data of " + config.dataset;
  options.shard_rank = config.launch.rank;
  options.shard_count = config.launch.world_size;
  return options;
}

LoaderOptions val_loader_options(const Config& config, const torch::Device& device,
                                 int64_t samples) {
  LoaderOptions options = train_loader_options(config, device);
  options.shuffle = false;
  options.name = "validation data of " + config.dataset;
  // The ranks share out a validation set of a global batch or more, as they do the training
  // set; a smaller one every rank evaluates whole (identical weights, identical result).
  if (samples < config.batch_size * config.launch.world_size) {
    options.shard_rank = 0;
    options.shard_count = 1;
  }
  return options;
}

}  // namespace ampt::data
