#include "ampt/commands/tokenize.h"

#include "ampt/config/command_flags.h"
#include "ampt/core/errors.h"
#include "ampt/data/input_files.h"
#include "ampt/data/loss_mask.h"
#include "ampt/data/text_shard.h"
#include "ampt/data/token_file.h"
#include "ampt/log/logger.h"
#include "ampt/log/progress.h"
#include "ampt/text/tokenize_chats.h"
#include "ampt/text/tokenizer_files.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <chrono>
#include <optional>

namespace ampt::commands {
namespace {

// tokenize takes no training option: its tokenizer and template flags are its own.
struct TokenizeSettings {
  std::string tokenizer;
  std::string out;
  std::string text_field = "text";
  std::string chat_template;
  std::string chat_template_kwargs;
  int64_t threads = 0;
  std::vector<std::string> inputs;
};

const config::FlagTable<TokenizeSettings>& tokenize_flags() {
  using S = TokenizeSettings;
  using config::flag_only;
  static const config::FlagTable<S> table = {
      config::required(flag_only(config::string_option(
          "tokenizer", "", &S::tokenizer, true, "PATH",
          "A directory with tokenizer.json (and tokenizer_config.json) or vocab.json + merges.txt, "
          "such a file, or a *.tiktoken file"))),
      config::required(flag_only(config::string_option(
          "out", "", &S::out, true, "FILE", "Shard to write (replaced whole when done)"))),
      flag_only(config::string_option("text_field", "", &S::text_field, true, "NAME",
                                      "The field of each JSON Lines record that holds its "
                                      "document")),
      flag_only(config::string_option(
          "chat_template", "", &S::chat_template, false, "FILE",
          "Chat template for instruction records: a .jinja file or a JSON one (default: the "
          "tokenizer's own Jinja template, else Llama-3's, ChatML or plain by its special tokens)")),
      flag_only(config::string_option(
          "chat_template_kwargs", "", &S::chat_template_kwargs, false, "JSON",
          "JSON object of variables for a Jinja chat template, e.g. '{\"enable_thinking\": "
          "false}'")),
      flag_only(config::integer_option("threads", "", &S::threads, config::Range::interval(0, true, 1024, true),
                                       "Encoding threads (0: one per core)")),
      config::required(config::positional_option(
          "inputs", &S::inputs, "INPUT...",
          "Text files, .jsonl files, directories of them, or quoted globs")),
  };
  return table;
}

}  // namespace

std::vector<config::FlagReference> tokenize_flag_references() {
  return config::flag_references(tokenize_flags());
}

std::string tokenize_help() {
  return config::command_help(
      "tokenize",
      "Usage: ampt tokenize --tokenizer PATH --out FILE.bin [FLAGS] INPUT...\n\n"
      "Tokenize text into an llm.c token shard (256-int32 header, then uint16 tokens; uint32,\n"
      "llm.c's Llama-3 layout, for a vocabulary beyond 65536 ids) that `ampt train --dataset\n"
      "tokens:FILE`, llm.c and nanoGPT read: <|endoftext|> before every document (Llama-3:\n"
      "<|begin_of_text|>); a text file is one document, a .jsonl file one per line. JSON Lines of\n"
      "instruction records (\"prompt\"/\"completion\" or \"messages\") are rendered by a chat\n"
      "template instead, and their loss mask (1 byte per token: bit 0 scored, bit 1 starts an\n"
      "example) is written beside the shard, FILE.bin -> FILE.mask.",
      tokenize_flag_references(), nullptr);
}

int run_tokenize(const std::vector<std::string>& args, const Environment&) {
  const auto flags = config::parse_command_flags("tokenize", tokenize_flags(), args);
  text::TokenizeFilesOptions options;
  options.text_field = flags.text_field;
  options.threads = static_cast<int>(flags.threads);
  std::vector<std::string> inputs;
  for (const auto& input : flags.inputs) {
    const auto files = data::document_files(input, {".txt", ".jsonl", ".parquet", ".arrow"});
    inputs.insert(inputs.end(), files.begin(), files.end());
  }

  const auto tokenizer = text::load_tokenizer(flags.tokenizer);
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
        flags.chat_template, fmt::format("{}", fmt::join(inputs, ", ")),
        flags.chat_template_kwargs);
  } else if (!flags.chat_template.empty() || !flags.chat_template_kwargs.empty()) {
    throw UsageError("--chat_template renders instruction records (\"prompt\"/\"completion\" or "
                     "\"messages\"), but the first JSON Lines record is a document");
  }
  const auto stats = data::write_text_shard(tokenizer, inputs, options, flags.out, chat ? &*chat : nullptr);
  const auto counted = [](auto n, const std::string& what) {
    return fmt::format("{} {}{}", n, what, n == 1 ? "" : "s");
  };
  fmt::print("wrote {}{}: {}, {} tokens from {} ({} bytes of text) in {:.2f} s (tokenizer {}, {} "
             "ids, {}; uint{} tokens)\n",
             flags.out, chat ? fmt::format(" and its loss mask {}", data::loss_mask_path(flags.out)) : "",
             counted(stats.documents, chat ? chat->style() + "example" : "document") +
                 (chat ? chat->rendered_by() : ""),
             stats.tokens,
             counted(inputs.size(), "file"), stats.bytes, seconds(), tokenizer.source(),
             tokenizer.vocab_size(), tokenizer.kind(),
             8 * data::llmc_layout(tokenizer.vocab_size()).bytes_per_token);
  return 0;
}

}  // namespace ampt::commands
