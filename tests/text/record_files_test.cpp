// Gzip-compressed JSON Lines (data.jsonl.gz) read as the plain file reads: the same records, the
// same ids; a .gz that is not gzip, or is cut short, is one line naming it.
#include "ampt/core/errors.h"
#include "ampt/text/record_files.h"
#include "ampt/text/tokenize_files.h"
#include "support/process.h"
#include "text/text_fixtures.h"

#include <catch2/catch.hpp>
#include <zlib.h>

#include <string>
#include <vector>

using namespace ampt::text;
using ampt::JsonValue;
using ampt::test::make_temp_dir;
using ampt::test::read_file;
using ampt::test::write_file;

namespace {

void write_gzip(const std::string& path, const std::string& text) {
  gzFile file = gzopen(path.c_str(), "wb");
  REQUIRE(file != nullptr);
  REQUIRE(gzwrite(file, text.data(), static_cast<unsigned>(text.size())) == static_cast<int>(text.size()));
  REQUIRE(gzclose(file) == Z_OK);
}

std::vector<std::string> records_of(const std::string& path) {
  std::vector<std::string> out;
  for_each_file_record(path, 0, [&](const JsonValue& record, const RecordPlace& place, int64_t) {
    out.push_back(place.prefix().substr(path.size()) + " " + record.find("text")->string);
  });
  return out;
}

std::vector<int32_t> ids_of(const std::string& path) {
  TokenizeFilesOptions options;  // by extension: .jsonl.gz is JSON Lines
  std::vector<int32_t> ids;
  tokenize_files(ampt::test::byte_tokenizer(), {path}, options,
                 [&](auto span) { ids.insert(ids.end(), span.begin(), span.end()); });
  return ids;
}

}  // namespace

TEST_CASE("record files: .jsonl.gz reads as the plain JSON Lines does, and a bad one is one line", "[text][records]") {
  const auto dir = make_temp_dir();
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "{\"text\": \"document " + std::to_string(i) + " ünï\"}\n" + (i % 7 ? "" : "\n");
  write_file(dir + "/a.jsonl", text);
  write_gzip(dir + "/a.jsonl.gz", text);
  CHECK(is_gzip_file(dir + "/a.jsonl.gz"));
  CHECK_FALSE(is_gzip_file(dir + "/a.jsonl"));
  const auto plain = records_of(dir + "/a.jsonl");
  REQUIRE(plain.size() == 2000);
  CHECK(records_of(dir + "/a.jsonl.gz") == plain);  // the same lines numbered alike
  CHECK(ids_of(dir + "/a.jsonl.gz") == ids_of(dir + "/a.jsonl"));
  CHECK(first_file_record(dir + "/a.jsonl.gz")->find("text")->string == "document 0 ünï");

  write_file(dir + "/plain.jsonl.gz", text);
  CHECK_THROWS_WITH(records_of(dir + "/plain.jsonl.gz"),
                    dir + "/plain.jsonl.gz: not a gzip file (one starts with the bytes 1f 8b)");
  const std::string gz = read_file(dir + "/a.jsonl.gz");
  write_file(dir + "/cut.jsonl.gz", gz.substr(0, gz.size() / 2));
  CHECK_THROWS_WITH(records_of(dir + "/cut.jsonl.gz"), Catch::StartsWith(dir + "/cut.jsonl.gz: a damaged gzip file: "));
  write_gzip(dir + "/empty.jsonl.gz", "");
  CHECK_THROWS_WITH(records_of(dir + "/empty.jsonl.gz"), dir + "/empty.jsonl.gz: file is empty (once decompressed)");
}
