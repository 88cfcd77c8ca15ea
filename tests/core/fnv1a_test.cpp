// The cache-key hash against the published FNV-1a 64-bit test vectors.
#include "ampt/core/fnv1a.h"

#include <catch2/catch.hpp>

#include <string>

using ampt::Fnv1a;

TEST_CASE("fnv1a: the published 64-bit test vectors", "[core][hash]") {
  CHECK(Fnv1a().digest() == 0xcbf29ce484222325ULL);
  CHECK(Fnv1a().add("a").digest() == 0xaf63dc4c8601ec8cULL);
  CHECK(Fnv1a().add("foobar").digest() == 0x85944171f73967e8ULL);
  CHECK(Fnv1a().add("foo").add("bar").digest() == Fnv1a().add("foobar").digest());
}

TEST_CASE("fnv1a: integers as 8 little-endian bytes, strings after their length", "[core][hash]") {
  const std::string le{'\x02', '\x01', 0, 0, 0, 0, 0, 0};
  CHECK(Fnv1a().add_int(0x0102).digest() == Fnv1a().add(le).digest());
  CHECK(Fnv1a().add_int(int32_t{-1}).digest() ==
        Fnv1a().add(std::string(8, '\xFF')).digest());  // sign-extended, as any int64 would be
  const std::string three{'\x03', 0, 0, 0, 0, 0, 0, 0};
  CHECK(Fnv1a().add_field("abc").digest() == Fnv1a().add(three).add("abc").digest());
  CHECK(Fnv1a().add_field("ab").add_field("c").digest() !=
        Fnv1a().add_field("a").add_field("bc").digest());
}
