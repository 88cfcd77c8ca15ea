// The reference of every flag of every command, made from the option tables themselves:
// `ampt config --list_options` prints it, `--markdown` as docs/options.md (which a test holds
// equal to this output), so the reference cannot go stale.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ampt/config/catalog.h"
#include "ampt/config/command_flags.h"

namespace ampt::config {

// One command as the reference lists it.
struct CommandReference {
  std::string_view name;     // "export"
  std::string_view summary;  // one line, as `ampt --help` says it
  std::vector<FlagReference> flags;  // its own flags
  bool training_options = false;     // every training option applies as well
};

// Markdown: the training options by YAML section (flag, YAML key, environment variable,
// default, allowed values, help), the other names they are accepted under, then each command's
// own flags. `catalog` gives --model's names.
std::string options_markdown(const std::vector<CommandReference>& commands, const Catalog& catalog);

// The same facts as plain text, one flag a line: `--batch_size N  training.batch_size
// AMPT_BATCH_SIZE  default 128`, each command's flags under its name.
std::string options_listing(const std::vector<CommandReference>& commands, const Catalog& catalog);

}  // namespace ampt::config
