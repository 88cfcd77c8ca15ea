// Parquet and Arrow files as `datasets` writes them (tests/tables/datasets_reference.py) read as
// the records datasets itself reads from them, in its order, for every record shape; the same
// tokens as the JSON Lines form of the same records; and every bad file one line naming it and the
// row group or row.
#include "ampt/core/errors.h"
#include "ampt/tables/table_file.h"
#include "ampt/text/prompt_records.h"
#include "ampt/text/record_files.h"
#include "ampt/text/tokenize_chats.h"
#include "ampt/text/tokenize_files.h"
#include "support/process.h"
#include "support/python_modules.h"
#include "support/skip.h"
#include "text/text_fixtures.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace ampt::text;
using ampt::JsonValue;
using ampt::test::make_temp_dir;
using ampt::test::run_process;
using ampt::test::write_file;

namespace {

constexpr const char* kScript = AMPT_SOURCE_DIR "/tests/tables/datasets_reference.py";

// DIR/<shape>/ of datasets_reference.py, made once per process.
const std::string& reference_dir() {
  static const std::string dir = [] {
    const auto out = make_temp_dir();
    const auto r = run_process({AMPT_PYTHON, kScript, "make", out});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return out;
  }();
  return dir;
}

// A JSON value written with its objects' members sorted: datasets orders a struct's fields by its
// own rules, and a record is the same whatever the order of its keys.
std::string canonical(const JsonValue& v) {
  switch (v.kind) {
    case JsonValue::Kind::null: return "null";
    case JsonValue::Kind::boolean: return v.boolean ? "true" : "false";
    case JsonValue::Kind::number: return v.integral ? fmt::format("{}", static_cast<int64_t>(v.number)) : fmt::format("{}", v.number);
    case JsonValue::Kind::string: return fmt::format("{:?}", v.string);
    case JsonValue::Kind::array: {
      std::vector<std::string> items;
      for (const auto& item : v.items) items.push_back(canonical(item));
      return "[" + fmt::format("{}", fmt::join(items, ",")) + "]";
    }
    case JsonValue::Kind::object: {
      std::vector<std::string> members;
      for (const auto& [key, value] : v.members) members.push_back(fmt::format("{:?}:{}", key, canonical(value)));
      std::ranges::sort(members);
      return "{" + fmt::format("{}", fmt::join(members, ",")) + "}";
    }
  }
  return "?";
}

std::vector<std::string> records_of(const std::vector<std::string>& files) {
  std::vector<std::string> out;
  for (const auto& file : files) {
    for_each_file_record(file, 0, [&](const JsonValue& record, const RecordPlace&, int64_t) {
      out.push_back(canonical(record));
    });
  }
  return out;
}

std::vector<std::string> parquet_files(const std::string& shape) {
  const auto dir = reference_dir() + "/" + shape;
  return {dir + "/train-00000-of-00002.parquet", dir + "/train-00001-of-00002.parquet"};
}

std::vector<std::string> arrow_files(const std::string& shape) {
  const auto dir = reference_dir() + "/" + shape + "/saved";
  return {dir + "/data-00000-of-00002.arrow", dir + "/data-00001-of-00002.arrow"};
}

std::string reference_jsonl(const std::string& shape) { return reference_dir() + "/" + shape + "/reference.jsonl"; }

const std::vector<std::string> kShapes = {"text",       "messages",   "conversations",
                                          "alpaca",     "preference", "conversational_preference",
                                          "prompts"};

bool have_datasets() { return ampt::test::python_has("datasets, pyarrow"); }

struct Tokens {
  std::vector<int32_t> ids;
  std::vector<uint8_t> mask;
};

Tokens chat_tokens(const Tokenizer& tokenizer, const std::vector<std::string>& files) {
  const auto chat = records_template(files, InputFormat::records, tokenizer, "", "data", "");
  TokenizeFilesOptions options;
  options.format = InputFormat::records;
  Tokens out;
  tokenize_chats(tokenizer, chat, files, options, [&](auto ids, auto mask) {
    out.ids.insert(out.ids.end(), ids.begin(), ids.end());
    out.mask.insert(out.mask.end(), mask.begin(), mask.end());
  });
  return out;
}

}  // namespace

TEST_CASE("tables: datasets' Parquet and Arrow files read as the records load_dataset and load_from_disk give, in order",
          "[tables][reference]") {
  if (!have_datasets()) AMPT_SKIP(reference, "skipping: datasets and pyarrow are not installed in " AMPT_PYTHON);
  for (const auto& shape : kShapes) {
    INFO(shape);
    std::vector<std::string> expected;
    {
      std::ifstream in(reference_jsonl(shape));
      for (std::string line; std::getline(in, line);) expected.push_back(canonical(ampt::parse_json(line)));
    }
    REQUIRE(expected.size() >= 7);
    CHECK(records_of(parquet_files(shape)) == expected);  // row groups of 2 rows, two files
    CHECK(records_of(arrow_files(shape)) == expected);    // save_to_disk's IPC streams
  }
  // Where a record was read: its row group and row, as every error about it says.
  std::vector<std::string> places;
  for_each_file_record(parquet_files("messages")[0], 0, [&](const JsonValue&, const RecordPlace& place, int64_t) {
    places.push_back(place.prefix());
  });
  const auto file = parquet_files("messages")[0];
  CHECK(places == std::vector<std::string>{file + ": row group 0, row 1", file + ": row group 0, row 2",
                                           file + ": row group 1, row 3", file + ": row group 1, row 4"});
  CHECK(ampt::tables::table_schema(file) ==
        "messages: list<element: struct<role: string, content: string>>");
}

TEST_CASE("tables: records from Parquet and Arrow give the tokens of their JSON Lines form, token for token",
          "[tables][reference]") {
  if (!have_datasets()) AMPT_SKIP(reference, "skipping: datasets and pyarrow are not installed in " AMPT_PYTHON);
  const auto tokenizer = ampt::test::byte_tokenizer({"<|im_start|>", "<|im_end|>"});
  for (const auto& shape : {"messages", "conversations", "alpaca", "preference", "conversational_preference"}) {
    INFO(shape);
    const Tokens expected = chat_tokens(tokenizer, {reference_jsonl(shape)});
    REQUIRE(expected.ids.size() > 100);
    const Tokens parquet = chat_tokens(tokenizer, parquet_files(shape));
    CHECK(parquet.ids == expected.ids);
    CHECK(parquet.mask == expected.mask);
    const Tokens arrow = chat_tokens(tokenizer, arrow_files(shape));
    CHECK(arrow.ids == expected.ids);
    CHECK(arrow.mask == expected.mask);
  }
  const auto documents = [&](const std::vector<std::string>& files) {
    TokenizeFilesOptions options;
    options.format = InputFormat::by_extension;  // .parquet and .arrow are record files by their bytes
    std::vector<int32_t> ids;
    tokenize_files(tokenizer, files, options, [&](auto span) { ids.insert(ids.end(), span.begin(), span.end()); });
    return ids;
  };
  const auto expected = documents({reference_jsonl("text")});
  CHECK(expected.size() > 100);
  CHECK(documents(parquet_files("text")) == expected);
  CHECK(documents(arrow_files("text")) == expected);
  const auto prompts = [&](const std::vector<std::string>& files) {
    std::vector<std::string> out;
    for (const auto& p : read_prompt_records(tokenizer, builtin_chat_template(tokenizer), files).records) {
      out.push_back(fmt::format("{} {}", fmt::join(p.ids, ","), canonical(p.record)));
    }
    return out;
  };
  CHECK(prompts(parquet_files("prompts")) == prompts({reference_jsonl("prompts")}));
}

TEST_CASE("tables: a bad Parquet or Arrow file is one line naming the file, and the row group and row",
          "[tables][reference]") {
  if (!have_datasets()) AMPT_SKIP(reference, "skipping: datasets and pyarrow are not installed in " AMPT_PYTHON);
  const auto dir = make_temp_dir();
  const auto read_all = [](const std::string& path) {
    for_each_file_record(path, 0, [](const JsonValue&, const RecordPlace&, int64_t) {});
  };
  const auto bytes = ampt::test::read_file(parquet_files("messages")[0]);
  const auto bad = [&](const std::string& name, const std::string& contents) {
    write_file(dir + "/" + name, contents);
    return dir + "/" + name;
  };
  const auto truncated = bad("truncated.parquet", bytes.substr(0, bytes.size() / 2));
  CHECK_THROWS_WITH(read_all(truncated), Catch::StartsWith(truncated + ": not a readable Parquet file: "));
  const auto empty = bad("empty.parquet", "");
  CHECK_THROWS_WITH(read_all(empty), empty + ": an empty file, not a Parquet or Arrow table (a Parquet file "
                                             "starts with PAR1, an Arrow IPC file with ARROW1, an IPC stream "
                                             "with 0xFFFFFFFF)");
  const auto text = bad("notes.parquet", "{\"text\": \"a JSON line\"}\n");
  CHECK_THROWS_WITH(read_all(text), Catch::StartsWith(text + ": another kind of file, not a Parquet or Arrow table"));
  const auto stream = ampt::test::read_file(arrow_files("messages")[0]);
  const auto cut = bad("cut.arrow", stream.substr(0, stream.size() - 40));
  CHECK_THROWS_WITH(read_all(cut), Catch::StartsWith(cut + ": record batch "));
  // Every error is one line.
  for (const auto& path : {truncated, empty, text, cut}) {
    try {
      read_all(path);
    } catch (const ampt::RuntimeError& e) {
      CHECK(std::string(e.what()).find('\n') == std::string::npos);
    }
  }
  // A column of the wrong type or a missing one: the record's own errors, naming the row.
  const auto tokenizer = ampt::test::byte_tokenizer({"<|im_start|>", "<|im_end|>"});
  const auto texts = parquet_files("text");
  TokenizeFilesOptions options;
  options.format = InputFormat::records;
  options.text_field = "body";
  CHECK_THROWS_WITH(tokenize_files(tokenizer, texts, options, [](auto) {}),
                    Catch::StartsWith(texts[0] + ": row group 0, row 1: "));
  CHECK_THROWS_WITH(chat_tokens(tokenizer, parquet_files("prompts")),
                    Catch::StartsWith(parquet_files("prompts")[0] + ": row group 0, row 1: "));
}
