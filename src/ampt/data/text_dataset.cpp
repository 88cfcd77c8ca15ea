#include "ampt/data/text_dataset.h"

#include "ampt/config/enum_names.h"
#include "ampt/core/errors.h"
#include "ampt/data/dataset_files.h"
#include "ampt/data/document_examples.h"
#include "ampt/data/input_files.h"
#include "ampt/data/loss_mask.h"
#include "ampt/data/preference_pairs.h"
#include "ampt/data/prompt_dataset.h"
#include "ampt/data/run_tokenizer.h"
#include "ampt/data/text_file.h"
#include "ampt/data/text_shard.h"
#include "ampt/data/token_cache.h"
#include "ampt/data/token_file.h"
#include "ampt/text/tokenize_chats.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <optional>

namespace ampt::data {
namespace {

namespace fs = std::filesystem;
using config::Config;

// The documents of a dataset as runs of tokens.
struct Corpus {
  std::vector<TokenSpan> spans;
  std::vector<Document> documents;
  // Instruction records: examples (packed into windows, or one per window), scored where masks
  // say (none: every token).
  bool instruction = false;
  std::vector<TokenSpan> masks;
  // Preference records: the mask that tells each pair's chosen and rejected examples apart.
  std::optional<TokenSpan> preference_mask;
  std::optional<int32_t> separator;  // <|endoftext|>, when tokenized
  int64_t pad = 0;                   // the input id of padding (never scored)
  std::string summary;               // "3 documents, 1.2K tokens (...)"
};

// The spec's prefix ("jsonl", "parquet"), which names its shards in the token cache.
std::string_view kind_name(config::DatasetKind kind) {
  switch (kind) {
    case config::DatasetKind::jsonl: return "jsonl";
    case config::DatasetKind::parquet: return "parquet";
    case config::DatasetKind::arrow: return "arrow";
    default: return "text";
  }
}

std::string plural(int64_t n, std::string_view what) {
  return fmt::format("{} {}{}", human_count(n), what, n == 1 ? "" : "s");
}

// Each file's bytes, mapped in place, one document per file.
Corpus text_bytes(const std::vector<std::string>& files) {
  Corpus corpus;
  int64_t bytes = 0;
  for (const auto& file : files) {
    corpus.spans.push_back(open_text_file(file));
    const TokenSpan& span = corpus.spans.back();
    corpus.documents.push_back({corpus.spans.size() - 1, 0, span.count});
    bytes += span.count;
  }
  corpus.summary = fmt::format("{}, {} bytes as tokens", plural(static_cast<int64_t>(files.size()), "file"),
                               human_count(bytes));
  return corpus;
}

// The records' text fields in one buffer, a newline between two.
Corpus jsonl_bytes(const std::vector<std::string>& files, const std::string& text_field,
                   const std::string& name) {
  auto bytes = std::make_shared<std::string>();
  Corpus corpus;
  text::read_documents(files, text::InputFormat::records, text_field,
                       [&](std::string document, int64_t) {
                         if (!corpus.documents.empty()) bytes->push_back('\n');
                         corpus.documents.push_back({0, static_cast<int64_t>(bytes->size()),
                                                     static_cast<int64_t>(document.size())});
                         bytes->append(document);
                       });
  const auto count = static_cast<int64_t>(bytes->size());
  const void* data = bytes->data();
  corpus.spans.push_back({.name = name, .owner = std::move(bytes), .data = data, .count = count,
                          .bytes_per_token = 1});
  corpus.summary = fmt::format("{}, {} bytes as tokens",
                               plural(static_cast<int64_t>(corpus.documents.size()), "document"),
                               human_count(corpus.spans.front().count));
  return corpus;
}

// The documents tokenized into a shard of the token cache, made now or by an earlier run;
// instruction records rendered by `chat` into examples with their loss mask.
Corpus tokenized(const text::Tokenizer& tokenizer, const std::vector<std::string>& files,
                 const config::DatasetSpec& spec, const std::string& split, const Config& config,
                 int64_t vocab_size, const text::InputProgress& progress, const text::ChatTemplate* chat) {
  if (tokenizer.vocab_size() > vocab_size) {
    throw UsageError(fmt::format(
        "the tokenizer {} has {} tokens but the model's vocab_size is {}: set --vocab_size to at "
        "least {}",
        tokenizer.source(), tokenizer.vocab_size(), vocab_size, tokenizer.vocab_size()));
  }
  text::TokenizeFilesOptions options;
  options.format = config::is_record_data(spec.kind) ? text::InputFormat::records : text::InputFormat::text;
  options.text_field = config.text_field;
  options.progress = progress;
  const auto cache_dir = token_cache_dir(config);
  auto named = fs::path(spec.path).lexically_normal();
  if (named.filename().empty()) named = named.parent_path();  // "data/stories/"
  const auto name = fmt::format("{}-{}{}", kind_name(spec.kind),
                                named.filename().string(), split.empty() ? "" : "-" + split);
  const auto start = std::chrono::steady_clock::now();
  const auto shard = cached_text_shard(tokenizer, files, options, cache_dir, name, chat);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  Corpus corpus;
  corpus.spans.push_back(open_token_file(shard.path).span);
  const TokenSpan& span = corpus.spans.front();
  corpus.separator = tokenizer.eot_id();
  corpus.pad = tokenizer.eot_id();
  // Packed windows need only the count; a list of a large corpus's documents would not be small.
  int64_t documents = 0;
  std::string what = "document";
  std::string rendered;  // which Jinja template rendered the examples
  if (chat != nullptr) {
    const TokenSpan mask = open_loss_mask(shard.mask, span);
    corpus.instruction = true;
    corpus.documents = mask_examples(mask, 0);
    documents = static_cast<int64_t>(corpus.documents.size());
    rendered = chat->rendered_by();
    what = chat->style() + "example";
    if (holds_pairs(mask)) {
      corpus.preference_mask = mask;
      documents /= 2;
      what = chat->style() + "preference record";
    } else if (!config.train_on_prompt) {
      corpus.masks.push_back(mask);
    }
  } else if (config.packing) {
    documents = count_token(span, tokenizer.eot_id());
  } else {
    corpus.documents = split_at(span, 0, tokenizer.eot_id());
    documents = static_cast<int64_t>(corpus.documents.size());
  }
  corpus.summary = fmt::format(
      "{}{}, {} tokens ({} from {}), {} {}", plural(documents, what), rendered,
      human_count(span.count), tokenizer.kind(),
      tokenizer.source(), shard.reused ? "reusing" : fmt::format("tokenized in {:.1f} s into", seconds),
      shard.path);
  return corpus;
}

std::string_view kind_of(const Corpus& corpus) {
  return corpus.preference_mask ? "preference records" : corpus.instruction ? "instruction records" : "documents";
}

int64_t sample_length(const Config& config, const SampleRequest& request) {
  if (config.max_length > request.block_size) {
    throw UsageError(fmt::format(
        "max_length {} exceeds the model's block_size {}: lower --max_length or raise "
        "--block_size",
        config.max_length, request.block_size));
  }
  return config.max_length > 0 ? config.max_length : request.block_size;
}

// The template of instruction records (--chat_template, else the tokenizer's own); nullopt for
// documents. Throws UsageError for instruction records without a tokenizer, or a template asked
// for documents.
std::optional<text::ChatTemplate> chat_template(const std::vector<std::string>& files, bool records,
                                                const Config& config,
                                                const std::optional<text::Tokenizer>& tokenizer) {
  if (!records || !text::holds_chat_records(files, text::InputFormat::records, config.text_field)) {
    if (!config.chat_template.empty()) {
      throw UsageError(fmt::format(
          "--chat_template renders instruction records (\"prompt\"/\"completion\" or "
          "\"messages\"), but {} holds documents (field \"{}\")",
          config.dataset, config.text_field));
    }
    return std::nullopt;
  }
  if (!tokenizer) {
    throw UsageError(fmt::format(
        "{} holds instruction records, which need a tokenizer for their chat template: name one "
        "with --tokenizer, or fine-tune with --init_from",
        config.dataset));
  }
  return text::records_template(files, text::InputFormat::records, *tokenizer,
                                config.chat_template, config.dataset, config.chat_template_kwargs);
}

}  // namespace

DataSplits open_text_dataset(const config::DatasetSpec& spec, const Config& config,
                             const SampleRequest& request, const text::InputProgress& progress) {
  const bool records = config::is_record_data(spec.kind);
  const DatasetFiles found = records ? dataset_files(spec.path, spec.kind)
                                     : DatasetFiles{.train = document_files(spec.path, {".txt"})};
  const auto& files = found.train;
  const int64_t length = sample_length(config, request);
  const auto tokenizer = run_tokenizer(config);
  const auto chat = chat_template(files, records, config, tokenizer);
  if (config::samples_completions(config.objective)) {
    if (!records || !tokenizer) {
      throw UsageError(fmt::format("--objective {} samples completions of prompt records (JSON Lines "
                                   "objects with a \"prompt\"){}",
                                   config::to_string(config.objective),
                                   records ? ", which need a tokenizer: name one with --tokenizer, or fine-tune "
                                           "with --init_from"
                                         : fmt::format(", and {} holds plain text", config.dataset)));
    }
    // Records without a "prompt" are no instruction records, and so have no template: reading
    // them names the first one's missing field.
    return open_prompt_dataset(files, config, request, *tokenizer,
                               chat ? *chat : text::builtin_chat_template(*tokenizer));
  }
  const auto corpus_of = [&](const std::vector<std::string>& split_files, const std::string& split) {
    return tokenizer ? tokenized(*tokenizer, split_files, spec, split, config, request.vocab_size, progress,
                                 chat ? &*chat : nullptr)
           : records ? jsonl_bytes(split_files, config.text_field, config.dataset)
                     : text_bytes(split_files);
  };
  Corpus corpus = corpus_of(files, "");
  // The data's own validation split, in place of a held-out val_fraction.
  std::optional<Corpus> val;
  if (!found.validation.empty()) val = corpus_of(found.validation, found.validation_split);
  require_objective_for(config, corpus.preference_mask.has_value(),
                        corpus.instruction ? "instruction records" : "documents");
  if (val && (val->preference_mask.has_value() != corpus.preference_mask.has_value() ||
              val->instruction != corpus.instruction)) {
    throw RuntimeError(fmt::format("{}: the {} split holds {} and the train split {}: a dataset's splits hold "
                                   "one kind of record",
                                   spec.path, found.validation_split, kind_of(*val), kind_of(corpus)));
  }
  // "; validation: the data's test split (1 file, 1319 plain examples, ...)"
  const std::string own_split =
      val ? fmt::format("; validation: the data's {} split ({}, {})", found.validation_split,
                        plural(static_cast<int64_t>(found.validation.size()), "file"), val->summary)
          : "";
  if (corpus.preference_mask) {
    const auto pairs_of = [&](Corpus& c) {
      return std::make_shared<PreferencePairs>(std::move(c.spans), std::vector<TokenSpan>{*c.preference_mask},
                                               length, c.pad, request.vocab_size, config.packing);
    };
    auto splits = pair_splits(pairs_of(corpus), val ? pairs_of(*val) : nullptr, length, request.vocab_size, config);
    splits.description =
        fmt::format("{}: {}{}; {}", config.dataset, corpus.summary, own_split, splits.description);
    return splits;
  }
  const DataSpec data_spec{Task::language_model, {length}, request.vocab_size};
  DataSplits splits;
  std::string samples;
  if (config.packing && !corpus.instruction) {
    if (config.document_mask && !corpus.separator) {
      throw UsageError(fmt::format(
          "--document_mask finds documents by their <|endoftext|>, which {} has none of without "
          "a tokenizer: name one with --tokenizer, or drop --document_mask",
          config.dataset));
    }
    const auto windows_of = [&](Corpus& c) {
      return std::make_shared<TokenWindows>(std::move(c.spans), length, request.vocab_size,
                                            config.document_mask ? c.separator : std::nullopt);
    };
    splits = val ? DataSplits{data_spec, windows_of(corpus), windows_of(*val), ""}
                 : held_out(windows_of(corpus), data_spec, config);
    samples = split_counts(splits, fmt::format("windows of {}{}", length,
                                               config.document_mask
                                                   ? ", documents masked from each other"
                                                   : ""));
  } else {
    const bool packed = config.packing && corpus.instruction;
    const auto examples_of = [&](Corpus& c) {
      return std::make_shared<DocumentExamples>(std::move(c.spans), c.documents, length,
                                                c.instruction ? std::nullopt : c.separator, c.pad,
                                                request.vocab_size, std::move(c.masks), packed);
    };
    const auto examples = examples_of(corpus);
    const ExampleCounts counts = examples->counts();
    auto padded_spec = data_spec;
    padded_spec.every_target_scored = false;
    splits = val ? DataSplits{padded_spec, examples, examples_of(*val), ""}
                 : held_out_examples(*examples, padded_spec, config);
    std::string cut;
    if (counts.dropped > 0) {
      cut += fmt::format(", {} dropped (nothing to predict{})", counts.dropped,
                         corpus.instruction ? fmt::format(" in the first {} tokens", length + 1) : "");
    }
    if (counts.truncated > 0) {
      cut += fmt::format(", {} truncated to {} tokens", counts.truncated, length + 1);
    }
    const std::string kind =
        !corpus.instruction ? "one example per document"
                            : fmt::format("instruction data, {}, {}", examples->packing_summary(),
                                          config.train_on_prompt ? "every token scored"
                                                                 : "loss on answers only");
    samples = fmt::format(
        "{}{}; {}", kind, cut,
        split_counts(splits, packed ? fmt::format("windows of {}", length)
                                    : fmt::format("examples of up to {} tokens, padded", length)));
  }
  splits.description = fmt::format("{}: {}{}; {}", config.dataset, corpus.summary, own_split, samples);
  return splits;
}

}  // namespace ampt::data
