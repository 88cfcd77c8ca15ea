#include "ampt/data/registry.h"

#include "ampt/config/dataset_spec.h"
#include "ampt/core/errors.h"
#include "ampt/config/enum_names.h"
#include "ampt/data/cifar.h"
#include "ampt/data/document_examples.h"
#include "ampt/data/idx.h"
#include "ampt/data/input_files.h"
#include "ampt/data/loss_mask.h"
#include "ampt/data/preference_pairs.h"
#include "ampt/data/run_tokenizer.h"
#include "ampt/data/seed.h"
#include "ampt/data/synthetic.h"
#include "ampt/data/synthetic_images.h"
#include "ampt/data/synthetic_tokens.h"
#include "ampt/data/tensor_dataset.h"
#include "ampt/data/text_dataset.h"
#include "ampt/data/token_file.h"
#include "ampt/data/token_windows.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <stdexcept>

namespace ampt::data {
namespace {

namespace fs = std::filesystem;
using config::Config;

// The loader's random stream, drawn from the one run seed (data_splits.cpp holds the split's).
constexpr uint64_t kLoaderStream = 2;

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
  std::shared_ptr<const DocumentExamples> instruction;  // the same, for instruction data
  std::string summary;  // "2 files (llm.c), 1.20M tokens"
  // Instruction examples by their loss masks: how they fill windows ("packed 30 examples ...",
  // DocumentExamples::packing_summary); empty for plain token windows.
  std::string examples;
  bool padded = false;  // one example per window
  // Preference shards (masks marking rejected examples): their pairs; null otherwise.
  std::shared_ptr<const PreferencePairs> pairs;
};

// Shards of instruction data (`ampt tokenize` on prompt/completion or messages records) have a
// loss mask beside them and give examples packed into windows (--packing) or one padded example
// per window, scored where the mask says; padding takes id 0, after the examples, where no
// scored position attends to it.
TokenShards open_token_shards(const std::vector<std::string>& paths, const SampleRequest& request,
                              const Config& config) {
  std::vector<TokenSpan> spans, masks;
  std::vector<Document> examples;
  std::set<std::string> formats;
  int64_t tokens = 0;
  for (const auto& path : paths) {
    auto file = open_token_file(path);
    formats.insert(file.format == TokenFileFormat::llmc ? "llm.c" : "nanoGPT");
    tokens += file.span.count;
    const std::string mask_path = loss_mask_path(path);
    if (fs::exists(mask_path)) {
      masks.push_back(open_loss_mask(mask_path, file.span));
      const auto found = mask_examples(masks.back(), spans.size());
      examples.insert(examples.end(), found.begin(), found.end());
    }
    spans.push_back(std::move(file.span));
  }
  if (!masks.empty() && masks.size() != spans.size()) {
    for (const auto& path : paths) {
      if (!fs::exists(loss_mask_path(path))) {
        throw RuntimeError(fmt::format(
            "{}: no loss mask {} beside it, unlike other shards of the data: keep instruction "
            "shards apart from others",
            path, loss_mask_path(path)));
      }
    }
  }
  const auto summary = fmt::format("{} file{} ({}{}), {} tokens", paths.size(), paths.size() == 1 ? "" : "s",
                                   fmt::join(formats, " + "), masks.empty() ? "" : ", loss masks",
                                   human_count(tokens));
  if (masks.empty()) {
    std::optional<int32_t> separator;
    if (config.document_mask) {
      const auto tokenizer = run_tokenizer(config);
      if (!tokenizer) {
        throw UsageError(fmt::format(
            "--document_mask finds the documents of {} by the tokenizer's <|endoftext|> id: name "
            "the tokenizer that wrote the shards with --tokenizer",
            config.dataset));
      }
      separator = tokenizer->eot_id();
    }
    return {std::make_shared<TokenWindows>(std::move(spans), request.block_size,
                                           request.vocab_size, separator),
            nullptr, summary + (separator ? ", documents masked from each other" : "")};
  }
  if (std::ranges::any_of(masks, holds_pairs)) {
    auto pairs = std::make_shared<PreferencePairs>(std::move(spans), std::move(masks),
                                                   request.block_size, 0, request.vocab_size,
                                                   config.packing);
    return {pairs, nullptr, summary, "", !config.packing, pairs};
  }
  if (config.train_on_prompt) masks.clear();
  const auto packed = std::make_shared<DocumentExamples>(
      std::move(spans), examples, request.block_size, std::nullopt, 0, request.vocab_size,
      std::move(masks), config.packing);
  const auto& counts = packed->counts();
  const auto truncated =
      counts.truncated > 0
          ? fmt::format(", {} truncated to {} tokens", counts.truncated, request.block_size + 1)
          : "";
  return {packed, packed, summary, packed->packing_summary() + truncated, !config.packing};
}

DataSplits open_tokens(const std::string& path, const Config& config,
                       const SampleRequest& request) {
  const auto paths = token_paths(path);
  auto train = open_token_shards(paths.train, request, config);
  require_objective_for(config, train.pairs != nullptr,
                        train.instruction ? "instruction examples" : "token windows");
  if (train.pairs) {
    std::shared_ptr<const PreferencePairs> val;
    if (!paths.val.empty()) {
      val = open_token_shards(paths.val, request, config).pairs;
      if (!val) {
        throw RuntimeError(fmt::format("tokens:{}: the training shards hold preference pairs and "
                                       "the validation shards do not",
                                       path));
      }
    }
    auto splits = pair_splits(train.pairs, val, request.block_size, request.vocab_size, config);
    splits.description = fmt::format("tokens:{}: {}; {}", path, train.summary, splits.description);
    return splits;
  }
  auto spec = token_spec(request);
  spec.every_target_scored = train.instruction == nullptr;
  DataSplits splits;
  std::string val_summary;
  if (paths.val.empty()) {
    splits = train.instruction ? held_out_examples(*train.instruction, spec, config)
                               : held_out(train.windows, spec, config);
    val_summary = fmt::format("val: {} held out", config.val_fraction);
  } else {
    auto val = open_token_shards(paths.val, request, config);
    splits = {spec, train.windows, val.windows, ""};
    val_summary = "val: " + val.summary;
  }
  splits.description = fmt::format(
      "tokens:{}: {}; {}; {}{}", path, train.summary, val_summary,
      train.examples.empty() ? "" : "instruction data, " + train.examples + "; ",
      split_counts(splits,
                   train.padded
                       ? fmt::format("examples of up to {} tokens, padded", request.block_size)
                       : fmt::format("windows of {}", request.block_size)));
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

DataSplits open_dataset(const Config& config, const SampleRequest& request,
                        const TokenizeProgress& progress) {
  const auto spec = config::parse_dataset_spec(config.dataset);
  if (!spec) {
    throw UsageError(fmt::format("invalid dataset '{}': expected one of {}", config.dataset,
                                 config::kDatasetSpecExpected));
  }
  if (config::is_language_model_data(spec->kind) && request.form != SampleRequest::Form::tokens) {
    throw UsageError(fmt::format(
        "dataset '{}' is language-model data but the model does not take token windows",
        config.dataset));
  }
  if (config.document_mask && !config::is_language_model_data(spec->kind)) {
    throw UsageError(fmt::format(
        "--document_mask keeps the documents of text:, record (jsonl:, parquet:, arrow:) or tokens: data apart; dataset "
        "'{}' has no documents: drop --document_mask",
        config.dataset));
  }
  // Record data and tokens: shards say for themselves whether they hold preference records.
  if (config::samples_completions(config.objective) && !config::is_record_data(spec->kind)) {
    throw UsageError(fmt::format("--objective {} samples completions of prompt records in jsonl:, "
                                 "parquet: or arrow: data, and dataset '{}' is none of them",
                                 config::to_string(config.objective), config.dataset));
  }
  if (config.objective != config::Objective::lm && !config::is_record_data(spec->kind) &&
      spec->kind != config::DatasetKind::tokens) {
    throw UsageError(fmt::format(
        "--objective {} learns from preference records (\"prompt\", \"chosen\", \"rejected\") "
        "in jsonl:, parquet: or arrow: data or its tokens: shards, and dataset '{}' is neither",
        config::to_string(config.objective), config.dataset));
  }
  switch (spec->kind) {
    case config::DatasetKind::synthetic: return open_synthetic(config, request);
    case config::DatasetKind::text:
    case config::DatasetKind::jsonl:
    case config::DatasetKind::parquet:
    case config::DatasetKind::arrow: return open_text_dataset(*spec, config, request, progress);
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

LoaderOptions val_loader_options(const LoaderOptions& training, const std::string& dataset,
                                 int64_t samples, int64_t batch_size) {
  LoaderOptions options = training;
  options.shuffle = false;
  options.keep_last = true;
  options.batch_size = batch_size;
  options.name = "validation data of " + dataset;
  // The ranks share out a validation set of a global batch or more, as they do the training
  // set; a smaller one every rank evaluates whole (identical weights, identical result).
  if (samples < batch_size * training.shard_count) {
    options.shard_rank = 0;
    options.shard_count = 1;
  }
  options.batch_size = std::min(options.batch_size, samples);
  return options;
}

int64_t fitted_batch_size(int64_t samples, int64_t batch_size, int64_t ranks,
                          const std::string& dataset) {
  if (samples == 0) {
    throw RuntimeError(fmt::format("the training split of {} is empty: add data or lower "
                                   "val_fraction",
                                   dataset));
  }
  if (samples < ranks) {
    throw RuntimeError(fmt::format("the training split of {} has {} samples, fewer than the {} "
                                   "ranks: add data or use fewer ranks",
                                   dataset, samples, ranks));
  }
  return std::min(batch_size, samples / ranks);
}

}  // namespace ampt::data
