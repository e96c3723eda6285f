// Pieces the embedding-gradient handlers share: operand checks, summing one row's updates in
// XLA's order, and running row ranges on the pool under the caller's floating-point control.
#ifndef EMBER_XLA_NATIVE_GRAD_COMMON_H_
#define EMBER_XLA_NATIVE_GRAD_COMMON_H_

#include <algorithm>
#include <functional>
#include <string>

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

// acc[0..d) = ((0 + u[p0]) + u[p1]) + ... over the row's update positions, each add rounded to
// T as XLA's scatter combiner rounds it.
template <typename T>
inline void SumRow(const T* upd, int64_t d, const int64_t* pos, int64_t n, float* acc) {
  for (int64_t j = 0; j < d; ++j) acc[j] = 0.0f;
  for (int64_t k = 0; k < n; ++k) {
    const T* u = upd + pos[k] * d;
    for (int64_t j = 0; j < d; ++j) acc[j] = Elem<T>::Round(acc[j] + Elem<T>::Load(u[j]));
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

}  // namespace ember

#endif  // EMBER_XLA_NATIVE_GRAD_COMMON_H_
