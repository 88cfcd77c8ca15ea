#include "ampt/text/word_cache.h"

#include <cstring>

namespace ampt::text {
namespace {

// The table starts small (a short text needs no more) and doubles while at most half full, up to
// 2^19 pieces (about 24 MiB with the arenas): more distinct pieces than a large English corpus
// holds, so a real corpus rarely empties it.
constexpr std::size_t kFirstSlots = std::size_t{1} << 12;
constexpr std::size_t kMaxUsed = std::size_t{1} << 19;

uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDULL;
  x ^= x >> 33;
  return x;
}

}  // namespace

WordCache::WordCache() : slots_(kFirstSlots) {}

uint64_t WordCache::hash(std::string_view piece) {
  uint64_t h = 0x9E3779B97F4A7C15ULL ^ piece.size();
  std::size_t pos = 0;
  for (; pos + 8 <= piece.size(); pos += 8) {
    uint64_t word = 0;
    std::memcpy(&word, piece.data() + pos, 8);
    h = mix(h ^ word) * 0xC4CEB9FE1A85EC53ULL;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, piece.data() + pos, piece.size() - pos);
  return mix(h ^ tail);
}

std::size_t WordCache::probe(std::string_view piece, uint64_t h) const {
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t slot = h & mask;; slot = (slot + 1) & mask) {
    const Slot& s = slots_[slot];
    if (s.key_length == 0) return slot;
    if (s.hash == h && s.key_length == piece.size() &&
        std::memcmp(keys_.data() + s.key_offset, piece.data(), piece.size()) == 0) {
      return slot;
    }
  }
}

std::span<const int32_t> WordCache::find(std::string_view piece) const {
  const Slot& s = slots_[probe(piece, hash(piece))];
  if (s.key_length == 0) return {};
  return {ids_.data() + s.ids_offset, s.ids_count};
}

void WordCache::insert(std::string_view piece, std::span<const int32_t> ids) {
  if (piece.empty() || piece.size() > kMaxPieceBytes) return;
  if (used_ >= kMaxUsed) clear();
  if (2 * (used_ + 1) > slots_.size()) grow();
  const uint64_t h = hash(piece);
  Slot& s = slots_[probe(piece, h)];
  s = {h, static_cast<uint32_t>(keys_.size()), static_cast<uint32_t>(piece.size()),
       static_cast<uint32_t>(ids_.size()), static_cast<uint32_t>(ids.size())};
  keys_.append(piece);
  ids_.insert(ids_.end(), ids.begin(), ids.end());
  ++used_;
}

void WordCache::grow() {
  std::vector<Slot> old(slots_.size() * 2);
  old.swap(slots_);
  const std::size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.key_length == 0) continue;
    std::size_t slot = s.hash & mask;
    while (slots_[slot].key_length != 0) slot = (slot + 1) & mask;
    slots_[slot] = s;
  }
}

void WordCache::clear() {
  slots_.assign(kFirstSlots, Slot{});
  keys_.clear();
  ids_.clear();
  used_ = 0;
}

}  // namespace ampt::text
