#include "ampt/text/utf8.h"
#include "support/process.h"
#include "support/skip.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <random>

using ampt::text::first_invalid_utf8;
using ampt::text::replace_invalid_utf8;

namespace {
const std::string kFFFD = "\xEF\xBF\xBD";
}

TEST_CASE("text: ill-formed UTF-8 becomes one U+FFFD per maximal subpart", "[text]") {
  CHECK(replace_invalid_utf8("caf\xC3\xA9") == "caf\xC3\xA9");
  CHECK(first_invalid_utf8("caf\xC3\xA9 \xF0\x9F\x98\x80") == 10);
  CHECK(replace_invalid_utf8("a\xFF" "b") == "a" + kFFFD + "b");
  CHECK(replace_invalid_utf8("\xE2\x82" "a") == kFFFD + "a");            // truncated 3-byte char
  CHECK(replace_invalid_utf8("\xED\xA0\x80") == kFFFD + kFFFD + kFFFD);  // a surrogate
  CHECK(replace_invalid_utf8("\xC0\xAF") == kFFFD + kFFFD);              // overlong '/'
  CHECK(replace_invalid_utf8("\xF4\x90\x80\x80") == kFFFD + kFFFD + kFFFD + kFFFD);  // > U+10FFFF
  CHECK(replace_invalid_utf8("x\xF0\x9F\x98") == "x" + kFFFD);            // cut at the end
  CHECK(first_invalid_utf8("abcdefghij\x80") == 10);
}

TEST_CASE("text: ill-formed UTF-8 is replaced as Python's bytes.decode(errors='replace') does", "[text]") {
  if (!std::filesystem::exists(AMPT_PYTHON)) {
    AMPT_SKIP(reference, "skipping the Python comparison: " AMPT_PYTHON " not found");
  }
  // Random bytes biased towards lead and continuation bytes, so most strings are ill-formed in
  // interesting ways.
  std::mt19937 rng(11);
  const std::string dir = ampt::test::make_temp_dir();
  std::vector<std::string> inputs;
  for (int i = 0; i < 300; ++i) {
    std::string s;
    const int length = static_cast<int>(rng() % 12);
    for (int j = 0; j < length; ++j) {
      const unsigned pick = rng() % 4;
      s += static_cast<char>(pick == 0 ? 'a' + rng() % 3 : pick == 1 ? 0x80 + rng() % 64 : 0xC0 + rng() % 64);
    }
    inputs.push_back(s);
    ampt::test::write_file(dir + "/" + std::to_string(i), s);
  }
  const auto result = ampt::test::run_process(
      {AMPT_PYTHON, "-c",
       "import sys, pathlib\n"
       "d = pathlib.Path(sys.argv[1])\n"
       "for i in range(int(sys.argv[2])):\n"
       "    (d / f'{i}.out').write_bytes((d / str(i)).read_bytes().decode('utf-8', 'replace').encode())\n",
       dir, std::to_string(inputs.size())});
  REQUIRE(result.exit_code == 0);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    INFO("input " << i);
    CHECK(replace_invalid_utf8(inputs[i]) == ampt::test::read_file(dir + "/" + std::to_string(i) + ".out"));
  }
}
