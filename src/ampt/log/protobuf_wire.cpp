#include "ampt/log/protobuf_wire.h"

#include <bit>

namespace ampt::log::protobuf {
namespace {

void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80U) {
    out += static_cast<char>((value & 0x7FU) | 0x80U);
    value >>= 7;
  }
  out += static_cast<char>(value);
}

void put_fixed(std::string& out, uint64_t bits, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((bits >> (8 * i)) & 0xFFU);
}

std::optional<uint64_t> take_varint(std::string_view& in) {
  uint64_t value = 0;
  for (int shift = 0; shift < 64 && !in.empty(); shift += 7) {
    const auto byte = static_cast<unsigned char>(in.front());
    in.remove_prefix(1);
    value |= static_cast<uint64_t>(byte & 0x7FU) << shift;
    if ((byte & 0x80U) == 0) return value;
  }
  return std::nullopt;
}

std::optional<uint64_t> take_fixed(std::string_view& in, std::size_t bytes) {
  if (in.size() < bytes) return std::nullopt;
  uint64_t value = 0;
  for (std::size_t i = 0; i < bytes; ++i) {
    value |= static_cast<uint64_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  }
  in.remove_prefix(bytes);
  return value;
}

}  // namespace

void Message::key(int field, int wire_type) {
  put_varint(data_, (static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type));
}

Message& Message::varint(int field, uint64_t value) {
  key(field, kVarint);
  put_varint(data_, value);
  return *this;
}

Message& Message::float32(int field, float value) {
  key(field, kFixed32);
  put_fixed(data_, std::bit_cast<uint32_t>(value), 4);
  return *this;
}

Message& Message::float64(int field, double value) {
  key(field, kFixed64);
  put_fixed(data_, std::bit_cast<uint64_t>(value), 8);
  return *this;
}

Message& Message::bytes(int field, std::string_view value) {
  key(field, kLengthDelimited);
  put_varint(data_, value.size());
  data_ += value;
  return *this;
}

Message& Message::message(int field, const Message& value) { return bytes(field, value.data()); }

std::optional<std::vector<Field>> parse_fields(std::string_view message) {
  std::vector<Field> fields;
  while (!message.empty()) {
    const auto key = take_varint(message);
    if (!key) return std::nullopt;
    Field field;
    field.number = static_cast<int>(*key >> 3);
    field.type = static_cast<WireType>(*key & 7U);
    std::optional<uint64_t> value;
    switch (field.type) {
      case kVarint: value = take_varint(message); break;
      case kFixed64: value = take_fixed(message, 8); break;
      case kFixed32: value = take_fixed(message, 4); break;
      case kLengthDelimited:
        value = take_varint(message);
        if (value && *value <= message.size()) {
          field.bytes = message.substr(0, *value);
          message.remove_prefix(*value);
        } else {
          value.reset();
        }
        break;
      default: break;
    }
    if (!value) return std::nullopt;
    field.value = *value;
    fields.push_back(field);
  }
  return fields;
}

}  // namespace ampt::log::protobuf
