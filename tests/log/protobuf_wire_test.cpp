// The protocol-buffer wire format: varints of every width, fixed and length-delimited fields,
// written and parsed back.
#include "ampt/log/protobuf_wire.h"

#include "support/hex.h"

#include <catch2/catch.hpp>

#include <bit>
#include <limits>

using ampt::test::hex;

TEST_CASE("protobuf wire: varints of every width and fixed fields parse back", "[log][tensorboard]") {
  using ampt::log::protobuf::Message;
  using ampt::log::protobuf::parse_fields;
  Message m;
  m.varint(1, 0).varint(2, 127).varint(3, 128).varint(4, std::numeric_limits<uint64_t>::max());
  m.float32(5, -2.5F).float64(6, 0.1).bytes(7, "abc").message(8, Message().varint(1, 300));
  // 300 = 0b10_0101100: low group 0x2c with the continuation bit, then 0x02.
  CHECK(hex(Message().varint(2, 300).data()) == "10ac02");
  const auto fields = parse_fields(m.data());
  REQUIRE(fields);
  REQUIRE(fields->size() == 8);
  CHECK((*fields)[1].value == 127);
  CHECK((*fields)[2].value == 128);
  CHECK((*fields)[3].value == std::numeric_limits<uint64_t>::max());
  CHECK(std::bit_cast<float>(static_cast<uint32_t>((*fields)[4].value)) == -2.5F);
  CHECK(std::bit_cast<double>((*fields)[5].value) == 0.1);
  CHECK((*fields)[6].bytes == "abc");
  CHECK(hex(std::string((*fields)[7].bytes)) == "08ac02");
  CHECK_FALSE(parse_fields(m.data().substr(0, m.data().size() - 1)));
}
