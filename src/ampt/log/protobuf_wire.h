// The protocol-buffer wire format, as much of it as TensorBoard's event files need: a builder of
// varint, 32/64-bit and length-delimited fields, and a reader of a message's top-level fields.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ampt::log::protobuf {

// One message's bytes, built field by field (fields are written in the order they are added).
class Message {
 public:
  Message& varint(int field, uint64_t value);     // int32/int64 (non-negative), enums, bools
  Message& float32(int field, float value);       // `float`
  Message& float64(int field, double value);      // `double`
  Message& bytes(int field, std::string_view value);  // strings, bytes
  Message& message(int field, const Message& value);  // embedded messages

  const std::string& data() const { return data_; }

 private:
  void key(int field, int wire_type);
  std::string data_;
};

enum WireType { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

struct Field {
  int number = 0;
  WireType type = kVarint;
  uint64_t value = 0;      // kVarint, and the raw bits of kFixed64 / kFixed32
  std::string_view bytes;  // kLengthDelimited
};

// The fields of `message` in order; nullopt when it is not well-formed (cut short, an unknown
// wire type).
std::optional<std::vector<Field>> parse_fields(std::string_view message);

}  // namespace ampt::log::protobuf
