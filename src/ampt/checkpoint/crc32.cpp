#include "ampt/checkpoint/crc32.h"

#include "ampt/core/crc.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ampt::checkpoint {
namespace {

constexpr uint32_t kPolynomial = 0xEDB88320U;  // reflected

constexpr auto kTable = reflected_crc_table(kPolynomial);

// On the inverted register, as zip's definition runs it.
uint32_t bytewise(uint32_t state, const unsigned char* bytes, size_t size) {
  for (size_t i = 0; i < size; ++i) state = kTable[(state ^ bytes[i]) & 0xFFU] ^ (state >> 8);
  return state;
}

#if defined(__x86_64__)
#define AMPT_CLMUL __attribute__((target("pclmul,sse4.1")))

AMPT_CLMUL inline __m128i load(const unsigned char* at) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(at));
}

// x·k folded onto `next`: the high and low halves of x multiplied by the two constants in k.
AMPT_CLMUL inline __m128i fold(__m128i x, __m128i k, __m128i next) {
  return _mm_xor_si128(
      _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x11), _mm_clmulepi64_si128(x, k, 0x00)), next);
}

// Intel's "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ" (Gopal et al. 2009):
// four 128-bit lanes folded 64 bytes per round, then folded to one lane and Barrett-reduced. The
// constants are x^k mod P for the reflected polynomial, from the paper's appendix (as Linux's
// crc32-pclmul and Chromium's zlib use them). `size` is a multiple of 16, at least 64.
AMPT_CLMUL uint32_t folded(uint32_t state, const unsigned char* p, size_t size) {
  const __m128i k1k2 = _mm_set_epi64x(0x01c6e41596, 0x0154442bd4);
  const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009e, 0x01751997d0);
  const __m128i k5 = _mm_set_epi64x(0, 0x0163cd6124);
  const __m128i poly = _mm_set_epi64x(0x01f7011641, 0x01db710641);
  __m128i x1 = _mm_xor_si128(load(p), _mm_cvtsi32_si128(static_cast<int>(state)));
  __m128i x2 = load(p + 16);
  __m128i x3 = load(p + 32);
  __m128i x4 = load(p + 48);
  p += 64;
  size -= 64;
  for (; size >= 64; p += 64, size -= 64) {
    x1 = fold(x1, k1k2, load(p));
    x2 = fold(x2, k1k2, load(p + 16));
    x3 = fold(x3, k1k2, load(p + 32));
    x4 = fold(x4, k1k2, load(p + 48));
  }
  x1 = fold(fold(fold(x1, k3k4, x2), k3k4, x3), k3k4, x4);
  for (; size >= 16; p += 16, size -= 16) x1 = fold(x1, k3k4, load(p));

  // 128 bits to 64, then Barrett reduction to 32.
  const __m128i low32 = _mm_setr_epi32(~0, 0, ~0, 0);
  x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), _mm_clmulepi64_si128(x1, k3k4, 0x10));
  x1 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, low32), k5, 0x00),
                     _mm_srli_si128(x1, 4));
  __m128i t = _mm_clmulepi64_si128(_mm_and_si128(x1, low32), poly, 0x10);
  t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), poly, 0x00);
  return static_cast<uint32_t>(_mm_extract_epi32(_mm_xor_si128(x1, t), 1));
}

const bool kHasClmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
#endif

// a * b modulo P, both polynomials in the reflected representation.
uint32_t multiply_mod(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (uint32_t bit = 1U << 31; bit != 0; bit >>= 1) {
    if ((a & bit) != 0) product ^= b;
    b = (b & 1U) != 0 ? (b >> 1) ^ kPolynomial : b >> 1;
  }
  return product;
}

}  // namespace

uint32_t crc32(uint32_t crc, const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint32_t state = ~crc;
#if defined(__x86_64__)
  if (kHasClmul && size >= 64) {
    const size_t folded_size = size & ~size_t{15};
    state = folded(state, bytes, folded_size);
    bytes += folded_size;
    size -= folded_size;
  }
#endif
  return ~bytewise(state, bytes, size);
}

uint32_t crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t size_b) {
  // crc(A·B) = crc(A)·x^(8·|B|) mod P  xor  crc(B): x^(8n) by squaring, x^1 is bit 30.
  uint32_t power = 1U << 31;  // x^0
  uint32_t square = 1U << 30;  // x^(2^0)
  for (uint64_t n = size_b * 8; n != 0; n >>= 1) {
    if ((n & 1U) != 0) power = multiply_mod(square, power);
    square = multiply_mod(square, square);
  }
  return multiply_mod(power, crc_a) ^ crc_b;
}

}  // namespace ampt::checkpoint
