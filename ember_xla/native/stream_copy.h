// Copying a large block that nobody reads soon (the untouched rows of a new table) with
// non-temporal stores: the destination's cache lines are written without being read first,
// so the copy moves two streams through memory (read source, write destination) instead of
// three (plus the read-for-ownership of every destination line), as glibc's memcpy does on its
// own only for single copies above its non-temporal threshold (tens of MiB). The bytes written
// are the same as memcpy's; the stores are weakly ordered, so a thread calls StreamFence()
// after its last StreamCopy and before its results are handed on.
#ifndef EMBER_XLA_NATIVE_STREAM_COPY_H_
#define EMBER_XLA_NATIVE_STREAM_COPY_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace ember {

// Copies smaller than this go to memcpy (a few cache lines: not worth the fence).
constexpr size_t kStreamBytes = 4096;

inline void StreamCopy(void* dst, const void* src, size_t bytes) {
#if defined(__SSE2__)
  if (bytes >= kStreamBytes) {
    auto* d = static_cast<unsigned char*>(dst);
    const auto* s = static_cast<const unsigned char*>(src);
    const size_t head = (64 - (reinterpret_cast<uintptr_t>(d) & 63)) & 63;
    std::memcpy(d, s, head);
    d += head;
    s += head;
    bytes -= head;
    const size_t lines = bytes / 64;
    for (size_t i = 0; i < lines; ++i, d += 64, s += 64) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
      const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
    }
    std::memcpy(d, s, bytes - lines * 64);
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

// Orders this thread's streaming stores before whatever it does next (handing results on).
inline void StreamFence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace ember

#endif  // EMBER_XLA_NATIVE_STREAM_COPY_H_
