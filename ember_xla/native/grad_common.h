// Pieces the embedding-gradient handlers share: operand checks, summing one row's updates in
// XLA's order, and running row ranges on the pool under the caller's floating-point control.
#ifndef EMBER_XLA_NATIVE_GRAD_COMMON_H_
#define EMBER_XLA_NATIVE_GRAD_COMMON_H_

#include <algorithm>
#include <climits>
#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "common.h"
#include "pool.h"
#include "row_groups.h"
#include "xla/ffi/api/ffi.h"

#if defined(__SSE__)
#include <immintrin.h>
#endif

namespace ember {

namespace ffi = xla::ffi;

// Where update i's row comes from: `base + i * d` (updates[L, D]), or, in the gathered form,
// `base + clamp(source_rows[i], 0, S - 1) * d` of a source[S, D] (XLA's row gather clamps its
// start index), skipped where mask[i] is false (the update is a zero row there, and adding
// +-0 to a sum that starts at +0 changes nothing).
struct UpdateRows {
  const void* base = nullptr;
  const void* source_rows = nullptr;  // nullptr: updates are per position
  bool rows32 = true;
  int64_t source_count = 0;
  const uint8_t* mask = nullptr;      // nullptr: every update counts
};


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

// The updates operand(s): `updates[L, D]`, or (gathered form) `source[S, D]` plus the trailing
// `source_rows[L]` (s32/s64) and optional `mask[L]` (pred) in `rest`.
inline ffi::Error GetUpdateRows(const char* kind, const ffi::AnyBuffer& indices,
                                const ffi::AnyBuffer& updates, ffi::RemainingArgs rest,
                                int64_t d, UpdateRows* out) {
  const std::string k = std::string("ember.") + kind + ": ";
  out->base = updates.untyped_data();
  if (rest.size() == 0) return CheckGradOperands(kind, indices, updates, d);
  if (rest.size() > 2) return ffi::Error::InvalidArgument(k + "too many operands");
  auto rows = rest.get<ffi::AnyBuffer>(0);
  if (rows.has_error()) return rows.error();
  if (updates.dimensions().size() != 2 || updates.dimensions()[1] != d ||
      updates.dimensions()[0] < 1)
    return ffi::Error::InvalidArgument(k + "source must be [S >= 1, D] with D = " +
                                       std::to_string(d));
  if (indices.dimensions().size() != 1 || rows->dimensions().size() != 1 ||
      rows->dimensions()[0] != indices.dimensions()[0])
    return ffi::Error::InvalidArgument(k + "indices and source_rows must be [L]");
  if (indices.element_type() != ffi::DataType::S32 && indices.element_type() != ffi::DataType::S64)
    return ffi::Error::InvalidArgument(k + "indices must be s32 or s64");
  if (rows->element_type() != ffi::DataType::S32 && rows->element_type() != ffi::DataType::S64)
    return ffi::Error::InvalidArgument(k + "source_rows must be s32 or s64");
  out->source_rows = rows->untyped_data();
  out->rows32 = rows->element_type() == ffi::DataType::S32;
  out->source_count = updates.dimensions()[0];
  if (rest.size() == 2) {
    auto mask = rest.get<ffi::AnyBuffer>(1);
    if (mask.has_error()) return mask.error();
    if (mask->element_type() != ffi::DataType::PRED || mask->dimensions().size() != 1 ||
        mask->dimensions()[0] != indices.dimensions()[0])
      return ffi::Error::InvalidArgument(k + "mask must be pred[L]");
    out->mask = static_cast<const uint8_t*>(mask->untyped_data());
  }
  return ffi::Error::Success();
}

inline RowGroups& ScratchGroups() {
  thread_local RowGroups groups;
  return groups;
}

inline bool HaveAvx2() {
  static const bool ok = __builtin_cpu_supports("avx2");
  return ok;
}

// Runs fn(cut[p], cut[p + 1]) for every non-empty part on the pool, each with the caller's
// MXCSR (XLA:CPU's flush-to-zero / denormals-are-zero), so results never depend on the thread.
inline void RunCuts(const std::vector<int64_t>& cut,
                    const std::function<void(int64_t, int64_t)>& fn) {
#if defined(__SSE__)
  const unsigned csr = _mm_getcsr();
#endif
  PoolRun(static_cast<int64_t>(cut.size()) - 1, [&](int64_t p) {
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

// Runs fn(r0, r1) over [0, total) split into even ranges of at least `min_per_part`.
inline void ParallelRows(int64_t total, int64_t min_per_part,
                         const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t parts = std::max<int64_t>(
      1, std::min<int64_t>(PoolThreads() * 4, total / std::max<int64_t>(1, min_per_part)));
  RunCuts(EvenCuts(total, parts), fn);
}

// Runs fn(k0, k1) over the row groups split into parts of about equal update counts (at most
// `max_parts` of them when that is positive).
inline void ParallelGroups(const RowGroups& g, int64_t max_parts,
                           const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t n = static_cast<int64_t>(g.rows.size());
  int64_t parts = std::max<int64_t>(1, std::min<int64_t>(PoolThreads() * 2, n / 16));
  if (max_parts > 0) parts = std::min(parts, max_parts);
  RunCuts(GroupCuts(g, parts), fn);
}

// The grouped updates as the sums read them: entry e of the groups (g.order[e]) adds row
// src[e] of base[*, d], or nothing where src[e] < 0 (a masked update: a zero row). Resolving
// the gathered form's source_rows (clamped) and mask once per call, in the groups' order and
// across the pool, keeps those random reads out of the dependent chain of the sums.
struct GroupedRows {
  const void* base = nullptr;
  const int32_t* src = nullptr;
};

inline GroupedRows ResolveRows(const RowGroups& g, const UpdateRows& upd) {
  if (!upd.source_rows) return {upd.base, g.order.data()};  // per position: row = position
  if (upd.source_count > INT32_MAX) throw std::length_error("more than 2^31 source rows");
  thread_local std::vector<int32_t> scratch;
  const int64_t n = static_cast<int64_t>(g.order.size());
  scratch.resize(static_cast<size_t>(n));
  int32_t* out = scratch.data();
  const int32_t* order = g.order.data();
  ParallelRows(n, 1 << 14, [&](int64_t e0, int64_t e1) {
    for (int64_t e = e0; e < e1; ++e) {
      const int64_t p = order[e];
      if (upd.mask && !upd.mask[p]) {
        out[e] = -1;
        continue;
      }
      int64_t r = upd.rows32 ? static_cast<const int32_t*>(upd.source_rows)[p]
                             : static_cast<const int64_t*>(upd.source_rows)[p];
      out[e] = static_cast<int32_t>(std::min<int64_t>(std::max<int64_t>(r, 0),
                                                      upd.source_count - 1));
    }
  });
  return {upd.base, out};
}

// Sums the f32 rows src[0..cnt) of base (skipping src < 0) into out[off, off + 8R) in their
// order (((0 + u_1) + u_2) + ..., plain IEEE adds, 8 floats per add), the R accumulators in
// registers (R = 16: a whole 128-float row in one pass), every cache line of the row kAhead
// entries ahead prefetched.
template <int R>
__attribute__((target("avx2"))) inline void SumChunkAvx2(const float* base, const int32_t* src,
                                                         int64_t cnt, int64_t d, int64_t off,
                                                         float* out) {
  __m256 a[R];
  for (int r = 0; r < R; ++r) a[r] = _mm256_setzero_ps();
  constexpr int64_t kAhead = 6;
  base += off;
  for (int64_t j = 0; j < cnt; ++j) {
    if (j + kAhead < cnt && src[j + kAhead] >= 0) {
      const float* p = base + static_cast<int64_t>(src[j + kAhead]) * d;
      for (int r = 0; r < R; r += 2) __builtin_prefetch(p + 8 * r);
    }
    if (src[j] < 0) continue;
    const float* u = base + static_cast<int64_t>(src[j]) * d;
    for (int r = 0; r < R; ++r) a[r] = _mm256_add_ps(a[r], _mm256_loadu_ps(u + 8 * r));
  }
  for (int r = 0; r < R; ++r) _mm256_storeu_ps(out + off + 8 * r, a[r]);
}

// Row k's updates summed in XLA's order into acc[0, d) (float; for bf16/f16 updates each add
// rounded to T, as XLA's scatter does).
template <typename T>
inline void SumGroup(const RowGroups& g, const GroupedRows& rows, int64_t d, int64_t k,
                     float* acc) {
  const int32_t* src = rows.src + g.start[k];
  const int64_t cnt = g.count(k);
  const T* base = static_cast<const T*>(rows.base);
  int64_t off = 0;
  if constexpr (std::is_same_v<T, float>) {
    if (HaveAvx2()) {
      for (; off + 128 <= d; off += 128) SumChunkAvx2<16>(base, src, cnt, d, off, acc);
      for (; off + 64 <= d; off += 64) SumChunkAvx2<8>(base, src, cnt, d, off, acc);
      for (; off + 8 <= d; off += 8) SumChunkAvx2<1>(base, src, cnt, d, off, acc);
    }
  }
  if (off == d) return;
  for (int64_t j = off; j < d; ++j) acc[j] = 0.0f;
  for (int64_t i = 0; i < cnt; ++i) {
    if (src[i] < 0) continue;
    const T* u = base + static_cast<int64_t>(src[i]) * d;
    for (int64_t j = off; j < d; ++j)
      acc[j] = Elem<T>::Round(acc[j] + Elem<T>::Load(u[j]));
  }
}

// Asks for the first update rows of group k (at most kFirstRows of them) to be read soon: a
// group's own sum prefetches its later rows, but with about one update per touched row (ids
// spread over a table as large as the batch) every group starts on a cache miss otherwise.
template <typename T>
inline void PrefetchGroupRows(const RowGroups& g, const GroupedRows& rows, int64_t d, int64_t k) {
  constexpr int64_t kFirstRows = 2;
  const int32_t* src = rows.src + g.start[k];
  const int64_t cnt = std::min<int64_t>(g.count(k), kFirstRows);
  const char* base = static_cast<const char*>(rows.base);
  const int64_t bytes = d * static_cast<int64_t>(sizeof(T));
  for (int64_t j = 0; j < cnt; ++j) {
    if (src[j] >= 0) PrefetchLines<3>(base + static_cast<int64_t>(src[j]) * bytes, bytes);
  }
}

// For the groups [k0, k1): fn(k, acc) with acc row k's summed updates (SumGroup); before
// that, ahead(k + kAheadGroups) so the caller can prefetch what that later fn will touch, and
// the first update rows of that group.
template <typename T, typename Ahead, typename Fn>
inline void ForGroupRange(const RowGroups& g, const GroupedRows& rows, int64_t d, int64_t k0,
                          int64_t k1, const Ahead& ahead, const Fn& fn) {
  constexpr int64_t kAheadGroups = 4;
  std::vector<float> acc(static_cast<size_t>(d));
  for (int64_t k = k0; k < std::min(k1, k0 + kAheadGroups); ++k) {
    ahead(k);
    PrefetchGroupRows<T>(g, rows, d, k);
  }
  for (int64_t k = k0; k < k1; ++k) {
    if (k + kAheadGroups < k1) {
      ahead(k + kAheadGroups);
      PrefetchGroupRows<T>(g, rows, d, k + kAheadGroups);
    }
    SumGroup<T>(g, rows, d, k, acc.data());
    fn(k, acc.data());
  }
}

}  // namespace ember

#endif  // EMBER_XLA_NATIVE_GRAD_COMMON_H_
