// Pieces the embedding-gradient handlers share: operand checks, summing one row's updates in
// XLA's order, and running row ranges on the pool under the caller's floating-point control.
#ifndef EMBER_XLA_NATIVE_GRAD_COMMON_H_
#define EMBER_XLA_NATIVE_GRAD_COMMON_H_

#include <algorithm>
#include <functional>
#include <string>
#include <type_traits>

#include "common.h"
#include "pool.h"
#include "row_groups.h"
#include "xla/ffi/api/ffi.h"

#if defined(__SSE__)
#include <immintrin.h>
#endif

namespace ember {

namespace ffi = xla::ffi;

// indices [L] s32/s64 and updates [L, D] whose D is the table's; returns the failure or Success.
inline ffi::Error CheckGradOperands(const char* kind, const ffi::AnyBuffer& indices,
                                    const ffi::AnyBuffer& updates, int64_t d) {
  const std::string k = std::string("ember.") + kind + ": ";
  if (indices.dimensions().size() != 1)
    return ffi::Error::InvalidArgument(k + "indices must have rank 1");
  if (indices.element_type() != ffi::DataType::S32 && indices.element_type() != ffi::DataType::S64)
    return ffi::Error::InvalidArgument(k + "indices must be s32 or s64");
  if (updates.dimensions().size() != 2 || updates.dimensions()[0] != indices.dimensions()[0] ||
      updates.dimensions()[1] != d)
    return ffi::Error::InvalidArgument(k + "updates must be [L, D] with L = " +
                                       std::to_string(indices.dimensions()[0]) +
                                       " indices and D = " + std::to_string(d));
  return ffi::Error::Success();
}

inline RowGroups& ScratchGroups() {
  thread_local RowGroups groups;
  return groups;
}

// Adds, for the groups [k0, k1), each update to its row of `acc` (row k - k0), in the updates'
// original order: one front-to-back scan of the updates, so every row's sum is XLA's
// ((0 + u_i1) + u_i2) + ..., each add rounded to T. `acc` must hold zeros (or the row's
// running sums, for T = the accumulator's storage type).
// The f32 form, compiled for AVX2 (8 floats per add; the same IEEE adds, no FMA), with the
// next updates' rows prefetched (they are read-modify-written in random order).
__attribute__((target("avx2"))) inline void AddGroupRangeF32Avx2(
    const RowGroups& g, const float* __restrict upd, int64_t d, int64_t k0, int64_t k1,
    float* __restrict acc, const int64_t* row_of_group) {
  const int64_t n = static_cast<int64_t>(g.group.size());
  const int32_t* grp = g.group.data();
  constexpr int64_t kAhead = 8;
  for (int64_t i = 0; i < n; ++i) {
    if (i + kAhead < n) {
      const int64_t kp = grp[i + kAhead];
      if (kp >= k0 && kp < k1)
        __builtin_prefetch(acc + (row_of_group ? row_of_group[kp] : kp - k0) * d, 1);
    }
    const int64_t k = grp[i];
    if (k < k0 || k >= k1) continue;
    float* __restrict a = acc + (row_of_group ? row_of_group[k] : k - k0) * d;
    const float* __restrict u = upd + i * d;
    for (int64_t j = 0; j < d; ++j) a[j] = a[j] + u[j];
  }
}

inline bool HaveAvx2() {
  static const bool ok = __builtin_cpu_supports("avx2");
  return ok;
}

template <typename T, typename A>
inline void AddGroupRange(const RowGroups& g, const T* upd, int64_t d, int64_t k0, int64_t k1,
                          A* acc, const int64_t* row_of_group) {
  if constexpr (std::is_same_v<T, float> && std::is_same_v<A, float>) {
    if (HaveAvx2()) return AddGroupRangeF32Avx2(g, upd, d, k0, k1, acc, row_of_group);
  }
  const int64_t n = static_cast<int64_t>(g.group.size());
  const int32_t* grp = g.group.data();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = grp[i];
    if (k < k0 || k >= k1) continue;
    A* a = acc + (row_of_group ? row_of_group[k] : k - k0) * d;
    const T* u = upd + i * d;
    for (int64_t j = 0; j < d; ++j)
      a[j] = Elem<A>::Store(Elem<T>::Round(Elem<A>::Load(a[j]) + Elem<T>::Load(u[j])));
  }
}

// Runs fn(r0, r1) over [0, total) split across the pool, each part with the caller's MXCSR
// (XLA:CPU's flush-to-zero / denormals-are-zero), so results never depend on the thread.
inline void ParallelRows(int64_t total, int64_t min_per_part,
                         const std::function<void(int64_t, int64_t)>& fn) {
#if defined(__SSE__)
  const unsigned csr = _mm_getcsr();
#endif
  const int64_t parts = std::max<int64_t>(
      1, std::min<int64_t>(PoolThreads() * 4, total / std::max<int64_t>(1, min_per_part)));
  const std::vector<int64_t> cut = EvenCuts(total, parts);
  PoolRun(parts, [&](int64_t p) {
    if (cut[p] >= cut[p + 1]) return;
#if defined(__SSE__)
    const unsigned saved = _mm_getcsr();
    if (saved != csr) _mm_setcsr(csr);
#endif
    fn(cut[p], cut[p + 1]);
#if defined(__SSE__)
    if (saved != csr) _mm_setcsr(saved);
#endif
  });
}

// Runs fn(k0, k1) over the row groups split into parts of about equal update counts, each part
// with the caller's MXCSR.
inline void ParallelGroups(const RowGroups& g, const std::function<void(int64_t, int64_t)>& fn) {
#if defined(__SSE__)
  const unsigned csr = _mm_getcsr();
#endif
  const int64_t n = static_cast<int64_t>(g.rows.size());
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(PoolThreads() * 2, n / 16));
  const std::vector<int64_t> cut = GroupCuts(g, parts);
  PoolRun(parts, [&](int64_t p) {
    if (cut[p] >= cut[p + 1]) return;
#if defined(__SSE__)
    const unsigned saved = _mm_getcsr();
    if (saved != csr) _mm_setcsr(csr);
#endif
    fn(cut[p], cut[p + 1]);
#if defined(__SSE__)
    if (saved != csr) _mm_setcsr(saved);
#endif
  });
}

}  // namespace ember

#endif  // EMBER_XLA_NATIVE_GRAD_COMMON_H_
