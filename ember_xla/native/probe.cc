// A memory-bandwidth probe for benchmarks (not an XLA target): sums `count` table rows picked by
// `idx` (random rows give the random-row-gather bandwidth the embedding kernels are bound by),
// split over `parts` pool parts, with software prefetch (prefetcht0, as the kernels: every line)
// `prefetch` lookups ahead (0: none).
// Part p accumulates into out[p*d .. (p+1)*d), which the caller zeroes.
#include <cstdint>

#include "common.h"
#include "handler.h"
#include "pool.h"

EMBER_EXPORT int64_t EmberPoolThreads() { return ember::PoolThreads(); }

namespace {

template <bool kAvx2>
__attribute__((always_inline)) inline void Sum(const float* table, int64_t d, const int32_t* idx,
                                               int64_t lo, int64_t hi, int64_t prefetch,
                                               float* __restrict acc) {
  const int64_t bytes = d * static_cast<int64_t>(sizeof(float));
  for (int64_t j = lo; j < hi; ++j) {
    if (prefetch > 0 && j + prefetch < hi) {
      ember::PrefetchLines<3>(table + idx[j + prefetch] * d, bytes);
    }
    const float* __restrict row = table + static_cast<int64_t>(idx[j]) * d;
    for (int64_t c = 0; c < d; ++c) acc[c] += row[c];
  }
}

void SumBaseline(const float* t, int64_t d, const int32_t* i, int64_t lo, int64_t hi,
                 int64_t pf, float* acc) {
  Sum<false>(t, d, i, lo, hi, pf, acc);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) void SumAvx2(const float* t, int64_t d, const int32_t* i,
                                             int64_t lo, int64_t hi, int64_t pf, float* acc) {
  Sum<true>(t, d, i, lo, hi, pf, acc);
}
#endif

}  // namespace

// Uses AVX2 when the CPU has it, like the kernels.
EMBER_EXPORT void EmberGatherProbe(const float* table, int64_t d, const int32_t* idx,
                                   int64_t count, int64_t parts, int64_t prefetch, float* out) {
  if (parts < 1) parts = 1;
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") != 0;
#else
  const bool avx2 = false;
#endif
  ember::PoolRun(parts, [&](int64_t p) {
    const int64_t lo = count * p / parts, hi = count * (p + 1) / parts;
#if defined(__x86_64__) && defined(__GNUC__)
    if (avx2) return SumAvx2(table, d, idx, lo, hi, prefetch, out + p * d);
#endif
    SumBaseline(table, d, idx, lo, hi, prefetch, out + p * d);
  });
}
