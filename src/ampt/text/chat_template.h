// How instruction turns become text. A model's own Jinja template (chat_jinja.h) where its
// tokenizer has one or --chat_template names a .jinja file; else a built-in template, each role's
// content between a prefix and a suffix, chosen by the tokenizer's special tokens (Llama-3's,
// ChatML or plain), or read from a small JSON file (--chat_template).
#pragma once

#include "ampt/text/chat_jinja.h"
#include "ampt/text/chat_record.h"
#include "ampt/text/tokenizer.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ampt::text {

struct TurnFormat {
  std::string prefix;  // never scored: Llama-3's "<|start_header_id|>user<|end_header_id|>\n\n"
  std::string suffix;  // scored after an assistant turn: the end of turn the model must learn
};

struct ChatTemplate {
  std::string name;            // "Llama-3", "ChatML", "plain" or the file: what summaries call it
  std::string begin;           // before the first turn (the BOS), never scored
  TurnFormat system, user, assistant;
  std::string separator;       // after every turn's suffix, never scored (ChatML's "\n")
  std::string default_system;  // the system turn of a record that has none; empty: none
  bool trim = false;           // contents lose surrounding whitespace (Llama-3's `| trim`)
  // The model's own template: when set, it renders the records and the fields above are unused.
  std::shared_ptr<const JinjaChat> jinja;

  const TurnFormat& format(Role role) const;
  // How summaries name what it renders: a built-in or JSON template before the noun ("Llama-3 "
  // example), a Jinja template after the count ("12 examples" " (chat template PATH)").
  std::string style() const;
  std::string rendered_by() const;
  // A hash of every field: part of the key of tokenized data made with it.
  uint64_t fingerprint() const;
};

// Llama-3-Instruct's when the tokenizer has <|start_header_id|>, <|end_header_id|> and <|eot_id|>:
//   BOS <|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|> ... (contents trimmed);
// ChatML (Qwen2's) when it has <|im_start|> and <|im_end|>:
//   <|im_start|>ROLE\nCONTENT<|im_end|>\n ... (no default system prompt);
// else plain: BOS (where the tokenizer has one), the contents one after another, the EOS after
// each assistant turn (GPT-2: prompt completion <|endoftext|>).
ChatTemplate builtin_chat_template(const Tokenizer& tokenizer);

// The plain one alone: what TRL renders standard (string) preference records with, whatever
// template the tokenizer has: the text itself, BOS first where the tokenizer has one, EOS after
// the answer.
ChatTemplate plain_chat_template(const Tokenizer& tokenizer);

// A template file: a JSON object with the keys "begin", "system", "user", "assistant" (each an
// object with string "prefix" and "suffix"), "separator", "default_system" (strings) and "trim"
// (a boolean), all optional. Throws RuntimeError naming the file and the key that is wrong.
ChatTemplate read_chat_template(const std::string& path);

// A piece of a rendered example: template text (its special tokens become their ids) or a turn's
// content (always plain text), and whether the loss scores its tokens.
struct ChatPiece {
  std::string_view text;
  bool template_text = false;
  bool scored = false;
};

// The pieces of `turns` (views into them and the template): begin, then per turn prefix,
// content, suffix and separator; an assistant turn's content and suffix are scored.
std::vector<ChatPiece> render_chat(const ChatTemplate& chat, const std::vector<Turn>& turns);

}  // namespace ampt::text
