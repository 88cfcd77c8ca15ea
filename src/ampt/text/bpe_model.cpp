#include "ampt/text/bpe_model.h"

#include "ampt/core/errors.h"
#include "ampt/text/utf8.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <string>
#include <unordered_map>

namespace ampt::text {
namespace {

constexpr uint64_t kEmpty = ~uint64_t{0};

uint64_t slot_of(uint64_t key, uint64_t mask) { return (key * 0x9E3779B97F4A7C15ULL >> 17) & mask; }

// The length of the UTF-8 sequence `lead` starts (1 for a byte that starts none).
std::size_t sequence_length(unsigned char lead) {
  return lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
}

// std::push_heap keeps the largest on top: "larger" here is the later merge.
bool later(const MergeScratch::Candidate& a, const MergeScratch::Candidate& b) {
  return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
}

}  // namespace

BpeModel::BpeModel(const Vocabulary& vocabulary)
    : vocab_size_(static_cast<int32_t>(vocabulary.tokens.size())) {
  byte_ids_.fill(-1);
  const auto count = vocab_size_;
  std::vector<bool> fallback(vocabulary.tokens.size(), false);
  for (const int32_t id : vocabulary.byte_fallback) {
    if (id >= 0) fallback[static_cast<std::size_t>(id)] = true;
  }
  for (int32_t id = 0; id < count; ++id) {
    const std::string& bytes = vocabulary.tokens[id];
    if (bytes.size() == 1 && !fallback[id] && byte_ids_[static_cast<unsigned char>(bytes[0])] < 0) {
      byte_ids_[static_cast<unsigned char>(bytes[0])] = id;
    }
  }
  // A byte that is no character's token stands for itself through its <0xXX> token.
  for (std::size_t b = 0; b < vocabulary.byte_fallback.size(); ++b) {
    if (byte_ids_[b] < 0) byte_ids_[b] = vocabulary.byte_fallback[b];
  }
  for (int b = 0; b < 256; ++b) {
    if (byte_ids_[b] < 0) {
      throw RuntimeError(fmt::format("{}: no token for the byte 0x{:02X}: not a byte-level BPE "
                                     "vocabulary, nor one with SentencePiece's byte fallback",
                                     vocabulary.source, b));
    }
  }
  const auto pairs = assemble_characters(vocabulary);
  const uint64_t capacity =
      std::bit_ceil(std::max<uint64_t>(16, (vocabulary.merges.size() + pairs.size()) * 2));
  mask_ = capacity - 1;
  keys_.assign(capacity, kEmpty);
  values_.assign(capacity, 0);
  for (const Merge& m : pairs) add(m);
  for (Merge m : vocabulary.merges) {
    for (const int32_t id : {m.left, m.right, m.result}) {
      if (id < 0 || id >= count) {
        throw RuntimeError(fmt::format("{}: a merge names token id {}, outside 0..{}",
                                       vocabulary.source, id, count - 1));
      }
    }
    m.rank += kAssemblyRanks;
    add(m);
  }
}

std::vector<Merge> BpeModel::assemble_characters(const Vocabulary& vocabulary) {
  if (vocabulary.byte_fallback.empty()) return {};
  std::vector<bool> special(vocabulary.tokens.size(), false);
  for (const int32_t id : vocabulary.special_ids) special[static_cast<std::size_t>(id)] = true;
  std::vector<Merge> out;
  std::unordered_map<std::string, int32_t> prefixes;  // a character's first bytes → their id
  for (int32_t id = 0; id < vocab_size_; ++id) {
    const std::string& token = vocabulary.tokens[id];
    if (special[id] || token.size() < 2 || token.size() > 4 ||
        sequence_length(static_cast<unsigned char>(token[0])) != token.size() ||
        first_invalid_utf8(token) != token.size()) {
      continue;
    }
    int32_t left = byte_ids_[static_cast<unsigned char>(token[0])];
    for (std::size_t k = 1; k < token.size(); ++k) {
      int32_t result = id;
      if (k + 1 < token.size()) {
        const auto [it, added] = prefixes.emplace(
            token.substr(0, k + 1), vocab_size_ + static_cast<int32_t>(expansions_.size()));
        if (added) {
          std::vector<int32_t> bytes;
          for (std::size_t b = 0; b <= k; ++b) {
            bytes.push_back(byte_ids_[static_cast<unsigned char>(token[b])]);
          }
          expansions_.push_back(std::move(bytes));
        }
        result = it->second;
      }
      out.push_back({left, byte_ids_[static_cast<unsigned char>(token[k])],
                     static_cast<int32_t>(k) - 1, result});
      left = result;
    }
  }
  return out;
}

void BpeModel::add(const Merge& m) {
  const uint64_t key = pair_key(m.left, m.right);
  uint64_t slot = slot_of(key, mask_);
  while (keys_[slot] != kEmpty && keys_[slot] != key) slot = (slot + 1) & mask_;
  // A pair listed twice merges at its first (lowest) rank, as Hugging Face's BPE keeps it.
  if (keys_[slot] == key && static_cast<int32_t>(values_[slot] >> 32) <= m.rank) return;
  keys_[slot] = key;
  values_[slot] = (static_cast<uint64_t>(static_cast<uint32_t>(m.rank)) << 32) |
                  static_cast<uint32_t>(m.result);
}

BpeModel::Found BpeModel::find(int32_t left, int32_t right) const {
  const uint64_t key = pair_key(left, right);
  for (uint64_t slot = slot_of(key, mask_);; slot = (slot + 1) & mask_) {
    if (keys_[slot] == key) {
      return {static_cast<int32_t>(values_[slot] >> 32), static_cast<int32_t>(values_[slot])};
    }
    if (keys_[slot] == kEmpty) return {-1, -1};
  }
}

void BpeModel::encode_piece(std::string_view piece, std::vector<int32_t>& out,
                            MergeScratch& scratch) const {
  const auto n = static_cast<int32_t>(piece.size());
  auto& ids = scratch.ids;
  auto& prev = scratch.prev;
  auto& next = scratch.next;
  auto& heap = scratch.heap;
  ids.resize(n);
  prev.resize(n);
  next.resize(n);
  heap.clear();
  for (int32_t i = 0; i < n; ++i) {
    ids[i] = byte_ids_[static_cast<unsigned char>(piece[i])];
    prev[i] = i - 1;
    next[i] = i + 1;
  }
  const auto offer = [&](int32_t i) {  // the pair starting at node i, if it merges
    if (next[i] >= n) return;
    const Found f = find(ids[i], ids[next[i]]);
    if (f.rank < 0) return;
    heap.push_back({f.rank, i, ids[i], ids[next[i]], f.result});
    std::push_heap(heap.begin(), heap.end(), later);
  };
  for (int32_t i = 0; i + 1 < n; ++i) offer(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const MergeScratch::Candidate c = heap.back();
    heap.pop_back();
    const int32_t right = next[c.pos];
    // Stale when either side has merged since: a merged node's id changed (merged-away ones
    // are -1), and a pair's ids decide its rank.
    if (right >= n || ids[c.pos] != c.left || ids[right] != c.right) continue;
    ids[c.pos] = c.result;
    ids[right] = -1;
    next[c.pos] = next[right];
    if (next[right] < n) prev[next[right]] = c.pos;
    if (prev[c.pos] >= 0) offer(prev[c.pos]);
    offer(c.pos);
  }
  for (int32_t i = 0; i < n; i = next[i]) {
    if (ids[i] < vocab_size_) {
      out.push_back(ids[i]);
    } else {  // a character's first bytes without the rest: each byte's own token
      const auto& bytes = expansions_[static_cast<std::size_t>(ids[i] - vocab_size_)];
      out.insert(out.end(), bytes.begin(), bytes.end());
    }
  }
}

}  // namespace ampt::text
