// ampt's NFC against Python's unicodedata (the tables' source, Unicode 14) on every assigned code
// point with its neighbours, out-of-order combining marks, Hangul and random mixtures. Hugging
// Face tokenizers' NFC (Rust's unicode-normalization, which Qwen2's tokenizer.json runs) orders
// some marks first assigned in Unicode 14 as if they had no combining class (its tables are
// older): those lines are counted, and must stay the few runs that hold such marks.
#include "ampt/core/json_reader.h"
#include "ampt/text/nfc.h"
#include "support/process.h"
#include "support/python_modules.h"
#include "support/skip.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

TEST_CASE("text: NFC equals unicodedata's and tokenizers' on every code point and mark order",
          "[text][python]") {
  // The reference needs Python alone (unicodedata); tokenizers' column is null without the
  // package. Anything else that stops the script is a failure, not a missing reference.
  if (!std::filesystem::exists(AMPT_PYTHON)) {
    AMPT_SKIP(reference, "skipping: " AMPT_PYTHON " missing (run scripts/bootstrap.sh)");
  }
  const bool tokenizers = ampt::test::python_has("tokenizers");
  if (!tokenizers) {
    AMPT_NOTE_SKIP(reference, "skipping tokenizers' half: tokenizers missing in the virtualenv");
  }
  const auto out = ampt::test::make_temp_dir() + "/nfc.jsonl";
  const auto r = ampt::test::run_process({AMPT_PYTHON, AMPT_SOURCE_DIR "/tests/text/nfc_reference.py", out});
  INFO("tests/text/nfc_reference.py: exit " << r.exit_code << "\n" << r.err);
  REQUIRE(r.exit_code == 0);
  std::ifstream in(out);
  int checked = 0, tokenizers_differ = 0, changed = 0;
  for (std::string line; std::getline(in, line);) {
    const auto row = ampt::parse_json(line);
    REQUIRE(row.items.size() == 3);
    const std::string& text = row.items[0].string;
    const std::string mine = ampt::text::to_nfc(text);
    INFO("line " << checked + 1 << ": " << text);
    REQUIRE(row.items[1].kind == ampt::JsonValue::Kind::string);
    CHECK(mine == row.items[1].string);
    REQUIRE(row.items[2].kind == (tokenizers ? ampt::JsonValue::Kind::string
                                             : ampt::JsonValue::Kind::null));
    if (tokenizers && mine != row.items[2].string) ++tokenizers_differ;
    changed += mine != text ? 1 : 0;
    ++checked;
  }
  CHECK(checked > 9000);
  CHECK(changed > 2000);  // the cases exercise normalization, not only text that is NFC already
  CHECK(tokenizers_differ < checked / 100);
  // Below U+0300 every text is NFC; an ASCII cut splits nothing that normalization joins.
  CHECK(ampt::text::to_nfc("caf\xC3\xA9 e\xCC\x81") == "caf\xC3\xA9 \xC3\xA9");
  CHECK(ampt::text::is_nfc_boundary("e\xCC\x81x", 3));
  CHECK_FALSE(ampt::text::is_nfc_boundary("e\xCC\x81x", 1));
}
