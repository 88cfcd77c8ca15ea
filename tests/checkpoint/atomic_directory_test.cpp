// checkpoint/atomic_directory: a directory appears whole or not at all, replaces an old one
// whole, and a failure before the commit leaves nothing, not even the parents it made.
#include "ampt/checkpoint/atomic_directory.h"
#include "ampt/core/errors.h"
#include "support/process.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <stdexcept>

using ampt::checkpoint::AtomicDirectory;
using ampt::test::entries;
using ampt::test::make_temp_dir;
using ampt::test::read_file;
using ampt::test::write_file;

TEST_CASE("atomic directory: published whole on commit, old one replaced whole, nothing left on a failure",
          "[checkpoint][atomic]") {
  const auto parent = make_temp_dir();
  const auto out = parent + "/a/b/out";
  {
    AtomicDirectory dir(out + "/");  // a trailing slash names the same directory
    write_file(dir.path() + "/one.txt", "1");
    CHECK_FALSE(std::filesystem::exists(out));
    CHECK(std::filesystem::path(dir.path()).parent_path() == std::filesystem::path(parent + "/a/b"));
    CHECK(std::filesystem::path(dir.path()).filename().string().starts_with(".out.tmp-"));
    dir.commit();
  }
  CHECK(entries(parent + "/a/b") == std::vector<std::string>{"out"});
  CHECK(read_file(out + "/one.txt") == "1");

  {
    AtomicDirectory dir(out);
    write_file(dir.path() + "/two.txt", "2");
    dir.commit();
  }
  CHECK(entries(parent + "/a/b") == std::vector<std::string>{"out"});
  CHECK(entries(out) == std::vector<std::string>{"two.txt"});

  const auto failing = [&](const std::string& path) {
    AtomicDirectory dir(path);
    write_file(dir.path() + "/three.txt", "3");
    throw std::runtime_error("failed midway");
  };
  CHECK_THROWS_WITH(failing(out), "failed midway");
  CHECK(entries(parent + "/a/b") == std::vector<std::string>{"out"});
  CHECK(entries(out) == std::vector<std::string>{"two.txt"});
  CHECK_THROWS_WITH(failing(parent + "/c/d/out"), "failed midway");
  CHECK(entries(parent) == std::vector<std::string>{"a"});

  write_file(parent + "/file", "x");
  CHECK_THROWS_AS(AtomicDirectory(parent + "/file"), ampt::RuntimeError);
  CHECK_THROWS_WITH(AtomicDirectory(parent + "/file"),
                    "cannot write the directory '" + parent + "/file': a file is in the way");
}
