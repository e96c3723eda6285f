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
  template <typename T>
  const T* Row(int64_t i, int64_t d) const {
    if (mask && !mask[i]) return nullptr;
    if (!source_rows) return static_cast<const T*>(base) + i * d;
    int64_t r = rows32 ? static_cast<const int32_t*>(source_rows)[i]
                       : static_cast<const int64_t*>(source_rows)[i];
    r = std::min<int64_t>(std::max<int64_t>(r, 0), source_count - 1);
    return static_cast<const T*>(base) + r * d;
  }
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

// Adds, for the groups [k0, k1), each update to its row of `acc` (row k - k0), in the updates'
// original order: one front-to-back scan of the updates, so every row's sum is XLA's
// ((0 + u_i1) + u_i2) + ..., each add rounded to T. `acc` must hold zeros (or the row's
// running sums, for T = the accumulator's storage type).
// The f32 form, compiled for AVX2 (8 floats per add; the same IEEE adds, no FMA), with the
// next updates' rows prefetched (they are read-modify-written in random order).
__attribute__((target("avx2"))) inline void AddGroupRangeF32Avx2(
    const RowGroups& g, const UpdateRows& upd, int64_t d, int64_t k0, int64_t k1,
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
    const float* __restrict u = upd.Row<float>(i, d);
    if (!u) continue;
    float* __restrict a = acc + (row_of_group ? row_of_group[k] : k - k0) * d;
    for (int64_t j = 0; j < d; ++j) a[j] = a[j] + u[j];
  }
}

inline bool HaveAvx2() {
  static const bool ok = __builtin_cpu_supports("avx2");
  return ok;
}

template <typename T, typename A>
inline void AddGroupRange(const RowGroups& g, const UpdateRows& upd, int64_t d, int64_t k0,
                          int64_t k1, A* acc, const int64_t* row_of_group) {
  if constexpr (std::is_same_v<T, float> && std::is_same_v<A, float>) {
    if (HaveAvx2()) return AddGroupRangeF32Avx2(g, upd, d, k0, k1, acc, row_of_group);
  }
  const int64_t n = static_cast<int64_t>(g.group.size());
  const int32_t* grp = g.group.data();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = grp[i];
    if (k < k0 || k >= k1) continue;
    const T* u = upd.Row<T>(i, d);
    if (!u) continue;
    A* a = acc + (row_of_group ? row_of_group[k] : k - k0) * d;
    for (int64_t j = 0; j < d; ++j)
      a[j] = Elem<A>::Store(Elem<T>::Round(Elem<A>::Load(a[j]) + Elem<T>::Load(u[j])));
  }
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

// Runs fn(k0, k1) over the row groups split into parts of about equal update counts.
inline void ParallelGroups(const RowGroups& g, const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t n = static_cast<int64_t>(g.rows.size());
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(PoolThreads() * 2, n / 16));
  RunCuts(GroupCuts(g, parts), fn);
}

}  // namespace ember

#endif  // EMBER_XLA_NATIVE_GRAD_COMMON_H_
