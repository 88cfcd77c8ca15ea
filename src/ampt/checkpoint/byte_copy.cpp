#include "ampt/checkpoint/byte_copy.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace ampt::checkpoint {
namespace {

constexpr size_t kCopyPiece = size_t{4} << 20;
constexpr unsigned kMaxThreads = 4;

void copy_piece(char* target, const char* source, size_t bytes) {
#if defined(__x86_64__)
  // Streaming stores need a 16-byte aligned target; the unaligned head goes through memcpy.
  const size_t head = std::min(bytes, (16 - reinterpret_cast<uintptr_t>(target) % 16) % 16);
  std::memcpy(target, source, head);
  target += head;
  source += head;
  bytes -= head;
  for (size_t block = 0; block < bytes / 64; ++block, target += 64, source += 64) {
    const auto* in = reinterpret_cast<const __m128i*>(source);
    auto* out = reinterpret_cast<__m128i*>(target);
    const __m128i a = _mm_loadu_si128(in), b = _mm_loadu_si128(in + 1);
    const __m128i c = _mm_loadu_si128(in + 2), d = _mm_loadu_si128(in + 3);
    _mm_stream_si128(out, a);
    _mm_stream_si128(out + 1, b);
    _mm_stream_si128(out + 2, c);
    _mm_stream_si128(out + 3, d);
  }
  std::memcpy(target, source, bytes % 64);
  _mm_sfence();  // streamed stores are weakly ordered: visible before whoever reads the target
#else
  std::memcpy(target, source, bytes);
#endif
}

}  // namespace

void copy_bytes(const std::vector<ByteCopy>& copies) {
  std::vector<ByteCopy> pieces;
  size_t total = 0;
  for (const auto& copy : copies) {
    total += copy.bytes;
    for (size_t offset = 0; offset < copy.bytes; offset += kCopyPiece) {
      pieces.push_back({static_cast<char*>(copy.target) + offset,
                        static_cast<const char*>(copy.source) + offset,
                        std::min(kCopyPiece, copy.bytes - offset)});
    }
  }
  std::atomic<size_t> next{0};
  const auto work = [&] {
    for (size_t i = next++; i < pieces.size(); i = next++) {
      copy_piece(static_cast<char*>(pieces[i].target), static_cast<const char*>(pieces[i].source),
                 pieces[i].bytes);
    }
  };
  // No helper for a copy of a few pieces: starting a thread costs more than it saves.
  const size_t wanted = std::min<size_t>(std::thread::hardware_concurrency(), total / (2 * kCopyPiece));
  const auto threads = static_cast<unsigned>(std::clamp<size_t>(wanted, 1, kMaxThreads));
  std::vector<std::thread> helpers;
  for (unsigned t = 1; t < threads; ++t) helpers.emplace_back(work);
  work();
  for (auto& helper : helpers) helper.join();
}

}  // namespace ampt::checkpoint
