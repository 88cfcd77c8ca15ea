#include "ampt/commands/tokenize.h"

#include "ampt/commands/own_flags.h"
#include "ampt/core/errors.h"
#include "ampt/data/input_files.h"
#include "ampt/data/loss_mask.h"
#include "ampt/data/text_shard.h"
#include "ampt/data/token_file.h"
#include "ampt/log/logger.h"
#include "ampt/log/progress.h"
#include "ampt/text/tokenize_chats.h"
#include "ampt/text/tokenizer_files.h"

#include <cxxopts.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <chrono>
#include <optional>

namespace ampt::commands {
namespace {

cxxopts::Options tokenize_parser() {
  cxxopts::Options parser(
      "ampt tokenize",
      "Tokenize text into an llm.c token shard (256-int32 header, then uint16 tokens; uint32, "
      "llm.c's Llama-3 layout, for a vocabulary beyond 65536 ids) that "
      "`ampt train --dataset tokens:FILE`, llm.c and nanoGPT read: <|endoftext|> before every "
      "document (Llama-3: <|begin_of_text|>); a text file is one document, a .jsonl file one per line. "
      "JSON Lines of instruction records (\"prompt\"/\"completion\" or \"messages\") are "
      "rendered by a chat template instead, and their loss mask (1 byte per token: bit 0 scored, "
      "bit 1 starts an example) is written beside the shard, FILE.bin -> FILE.mask.");
  parser.positional_help("INPUT...");
  parser.add_options()
      ("tokenizer", "GPT-2, Llama-3 or Qwen2 tokenizer: a directory with tokenizer.json (and tokenizer_config.json) or vocab.json + merges.txt, such a file, or a *.tiktoken file", cxxopts::value<std::string>(), "PATH")
      ("out", "shard to write (replaced whole when done)", cxxopts::value<std::string>(), "FILE")
      ("text_field", "the field of each JSON Lines record that holds its document", cxxopts::value<std::string>()->default_value("text"), "NAME")
      ("chat_template", "chat template for instruction records: a .jinja file or a JSON one (default: the tokenizer's own Jinja template, else Llama-3's, ChatML or plain by its special tokens)", cxxopts::value<std::string>(), "FILE")
      ("chat_template_kwargs", "JSON object of variables for a Jinja chat template, e.g. '{\"enable_thinking\": false}'", cxxopts::value<std::string>(), "JSON")
      ("threads", "encoding threads (0: one per core)", cxxopts::value<int>()->default_value("0"), "N")
      ("inputs", "text files, .jsonl files, directories of them, or quoted globs", cxxopts::value<std::vector<std::string>>(), "INPUT...")
      ("h,help", "show this help");
  parser.parse_positional({"inputs"});
  parser.allow_unrecognised_options();
  return parser;
}

}  // namespace

std::string tokenize_help() { return tokenize_parser().help(); }

int run_tokenize(const std::vector<std::string>& args, const Environment&) {
  auto parser = tokenize_parser();
  const auto result = parse_own_flags(parser, "tokenize", args,
                                      {"--tokenizer", "--out", "--text_field", "--chat_template",
                                       "--chat_template_kwargs", "--threads"});
  const auto tokenizer_path = required_flag(result, "tokenize", "tokenizer");
  const auto out = required_flag(result, "tokenize", "out");
  if (result.count("inputs") == 0) {
    throw UsageError("ampt tokenize needs INPUT files: ampt tokenize --tokenizer PATH --out FILE INPUT...");
  }
  text::TokenizeFilesOptions options;
  options.text_field = result["text_field"].as<std::string>();
  if (options.text_field.empty()) {
    throw UsageError("invalid value '' for --text_field: expected a field name");
  }
  options.threads = result["threads"].as<int>();
  if (options.threads < 0) {
    throw UsageError(fmt::format("invalid value '{}' for --threads: expected an integer >= 0",
                                 options.threads));
  }
  std::vector<std::string> inputs;
  for (const auto& input : result["inputs"].as<std::vector<std::string>>()) {
    const auto files = data::document_files(input, {".txt", ".jsonl"});
    inputs.insert(inputs.end(), files.begin(), files.end());
  }

  const auto tokenizer = text::load_tokenizer(tokenizer_path);
  const auto start = std::chrono::steady_clock::now();
  const auto seconds = [start] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  if (isatty(STDOUT_FILENO) != 0) {
    options.progress = [&seconds](int64_t done, int64_t total) {
      log::set_status_line(done >= total ? "" : log::format_byte_progress(done, total, seconds()));
    };
  }
  std::optional<text::ChatTemplate> chat;
  if (text::holds_chat_records(inputs, options.format, options.text_field)) {
    chat = text::records_template(
        inputs, options.format, tokenizer,
        result.count("chat_template") != 0 ? result["chat_template"].as<std::string>() : "",
        fmt::format("{}", fmt::join(inputs, ", ")),
        result.count("chat_template_kwargs") != 0 ? result["chat_template_kwargs"].as<std::string>() : "");
  } else if (result.count("chat_template") != 0 || result.count("chat_template_kwargs") != 0) {
    throw UsageError("--chat_template renders instruction records (\"prompt\"/\"completion\" or "
                     "\"messages\"), but the first JSON Lines record is a document");
  }
  const auto stats = data::write_text_shard(tokenizer, inputs, options, out, chat ? &*chat : nullptr);
  const auto counted = [](auto n, const std::string& what) {
    return fmt::format("{} {}{}", n, what, n == 1 ? "" : "s");
  };
  fmt::print("wrote {}{}: {}, {} tokens from {} ({} bytes of text) in {:.2f} s (tokenizer {}, {} "
             "ids, {}; uint{} tokens)\n",
             out, chat ? fmt::format(" and its loss mask {}", data::loss_mask_path(out)) : "",
             counted(stats.documents, chat ? chat->style() + "example" : "document") +
                 (chat ? chat->rendered_by() : ""),
             stats.tokens,
             counted(inputs.size(), "file"), stats.bytes, seconds(), tokenizer.source(),
             tokenizer.vocab_size(), tokenizer.kind(),
             8 * data::llmc_layout(tokenizer.vocab_size()).bytes_per_token);
  return 0;
}

}  // namespace ampt::commands
