// A 64-bit FNV-1a hash, fed piece by piece: the keys of caches that must change whenever what
// they were made from changes (not a defence against anyone crafting collisions).
#pragma once

#include <cstdint>
#include <string_view>
#include <type_traits>

namespace ampt {

class Fnv1a {
 public:
  Fnv1a& add(std::string_view bytes) {
    for (const char c : bytes) {
      state_ = (state_ ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
    }
    return *this;
  }
  // An integer as its 8 little-endian bytes, so that add(a).add(b) never runs two values together.
  template <class T>
    requires std::is_integral_v<T>
  Fnv1a& add_int(T value) {
    auto v = static_cast<uint64_t>(value);
    for (int i = 0; i < 8; ++i, v >>= 8) {
      state_ = (state_ ^ (v & 0xFFU)) * 0x100000001b3ULL;
    }
    return *this;
  }
  // A string with its length first, so that ("ab", "c") and ("a", "bc") differ.
  Fnv1a& add_field(std::string_view bytes) { return add_int(bytes.size()).add(bytes); }
  uint64_t digest() const { return state_; }

 private:
  uint64_t state_ = 0xcbf29ce484222325ULL;
};

}  // namespace ampt
