// What the fused sparse optimizers share: operand checks, and the driver that applies a
// per-row update to the touched rows of a table and its slot variables.
//
// The results may alias the operands (output_to_operand_aliasing: a donated table is updated
// in place) or be separate buffers (the rewrite does not alias a table parameter the caller
// keeps, so XLA does not copy it first): then every byte of the results is written once, the
// touched rows by the update (reading the operand rows), the untouched ones copied in runs
// (streaming stores for runs of 4 KiB and more: stream_copy.h),
// after the results' fresh pages are given huge-page advice (pages.h: AdviseOutput) and mapped
// in one system call per 2 MiB chunk (fresh_pages.h).
#ifndef EMBER_XLA_NATIVE_SPARSE_UPDATE_H_
#define EMBER_XLA_NATIVE_SPARSE_UPDATE_H_

#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common.h"
#include "fresh_pages.h"
#include "grad_common.h"
#include "pages.h"
#include "stream_copy.h"

namespace ember {

// An operand/result pair of a table-shaped array with `width` floats per row.
struct RowArray {
  const float* src;
  float* dst;
  int64_t width;
  bool distinct() const { return src != dst; }
};

inline RowArray Pair(const ffi::AnyBuffer& in, ffi::AnyBuffer& out, int64_t width) {
  return {static_cast<const float*>(in.untyped_data()), static_cast<float*>(out.untyped_data()),
          width};
}

inline bool Fma() {
  static const bool ok = __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2");
  return ok;
}

// Asks for the cache lines of row [p, p + d) to be written soon.
inline void PrefetchRow(const float* p, int64_t d) {
  for (int64_t j = 0; j < d; j += 16) __builtin_prefetch(p + j, 1);
}

// `in` and `out` are f32 with `table`'s dimensions (rank 2), or f32[V] when `vector_slot`.
inline ffi::Error CheckTableLike(const char* kind, const ffi::AnyBuffer& in,
                                 const ffi::AnyBuffer& out, const ffi::AnyBuffer& table,
                                 bool vector_slot = false) {
  const std::string k = std::string("ember.") + kind + ": ";
  if (in.element_type() != ffi::DataType::F32 || out.element_type() != ffi::DataType::F32)
    return ffi::Error::InvalidArgument(k + "tables must be f32");
  const auto want = table.dimensions();
  const size_t rank = vector_slot ? 1 : 2;
  bool ok = in.dimensions().size() == rank && out.dimensions().size() == rank && want.size() == 2;
  for (size_t i = 0; ok && i < rank; ++i)
    ok = in.dimensions()[i] == want[i] && out.dimensions()[i] == want[i];
  if (!ok)
    return ffi::Error::InvalidArgument(
        k + (vector_slot ? "the table must be [V, D], its slot and results [V]"
                         : "table, slots and results must all be [V, D]"));
  return ffi::Error::Success();
}

inline ffi::Error ScalarF32(const char* kind, const ffi::AnyBuffer& b, float* out) {
  if (b.element_type() != ffi::DataType::F32 || b.element_count() != 1)
    return ffi::Error::InvalidArgument(std::string("ember.") + kind + ": scalars must be f32[]");
  *out = *static_cast<const float*>(b.untyped_data());
  return ffi::Error::Success();
}

// Does t + 0 * scale leave every t (including -0) unchanged? Only for a finite negative scale
// (and a denormal t only where the caller keeps denormals: ForRows sees to that).
inline bool UntouchedUnchanged(float scale) {
  return std::isfinite(scale) && std::signbit(scale);
}

// Does the caller's MXCSR flush denormals (DAZ: read as the zero of their sign; FTZ: results
// flushed)? XLA:CPU runs with both, so its dense update t + 0 * scale of a row without gradient
// writes a denormal t as the zero of its sign, rows no id touches included.
inline bool DenormalsFlushed() {
#if defined(__SSE__)
  return (_mm_getcsr() & 0x8040u) != 0;
#else
  return false;
#endif
}

// The first row in [q, end) of a [V, width] array holding a denormal (exponent bits 0,
// mantissa not 0), or end: the rows a dense update changes under DenormalsFlushed. Read at
// memory speed.
__attribute__((target("avx2"))) inline int64_t FirstWithDenormal(const float* x, int64_t width,
                                                                 int64_t q, int64_t end) {
  const int64_t n = end * width;
  int64_t i = q * width;
  const __m256i magnitude = _mm256_set1_epi32(0x7fffffff);
  const __m256i smallest_normal = _mm256_set1_epi32(0x00800000), zero = _mm256_setzero_si256();
  for (; i + 8 <= n; i += 8) {
    const __m256i a = _mm256_and_si256(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)), magnitude);
    const __m256i hit = _mm256_and_si256(_mm256_cmpgt_epi32(smallest_normal, a),
                                         _mm256_cmpgt_epi32(a, zero));
    const int m = _mm256_movemask_ps(_mm256_castsi256_ps(hit));
    if (m != 0) return (i + __builtin_ctz(m)) / width;
  }
  for (; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, x + i, sizeof bits);
    bits &= 0x7fffffffu;
    if (bits != 0 && bits < 0x00800000u) return i / width;
  }
  return end;
}

// What the dense update does to a row without gradient: nothing (kIdentity), something
// (kDense: row_fn(row, 0) for every untouched row, XLA's result), or it depends on the row
// (kCheck: row_fn(row, 0) for the untouched rows the update changes; first_changed(q, end)
// returns the first such row in [q, end), or end). Under the caller's denormal flushing
// (DenormalsFlushed: XLA's) an untouched row holding a denormal in any of `arrays` is one the
// dense update changes too (to the zero of its sign), whatever the optimizer: ForRows makes
// kIdentity a kCheck then and adds a denormal test to every check (FirstWithDenormal).
enum class Untouched { kIdentity, kDense, kCheck };

// Below this many floats of work (the updates summed, plus every row of each array read by the
// untouched-row check or copied) a call runs on the calling thread alone: waking the pool costs
// more than the second core saves. Measured (optax SGD step, table kept, 2 cores): 1,000 x 16
// with 320 ids (21k floats) 27 us on one thread vs 78 us on two; 10,000 x 64 with 1,000 ids
// (704k floats) 539 us vs 383 us.
constexpr int64_t kSerialFloats = int64_t{1} << 17;

// Asks for the operand rows of row r to be read soon (the results' are the caller's `ahead`).
inline void PrefetchSources(const std::vector<RowArray>& arrays, int64_t r) {
  for (const RowArray& a : arrays) {
    if (a.distinct()) PrefetchLines<3>(a.src + r * a.width, a.width * 4);
  }
}

// Runs row_fn(row, grad) for the touched rows, grad the row's summed gradient (SumGroup, XLA's
// order), with ahead(row) first for a row a few groups later (prefetch). Then the untouched rows
// as `mode` says; those left alone have each distinct pair of `arrays` copied (in runs). On the
// calling thread alone below kSerialFloats of work.
template <typename AheadFn, typename RowFn, typename FirstChangedFn>
void ForRows(const RowGroups& g, const UpdateRows& upd, int64_t v, int64_t d, Untouched mode,
             const std::vector<RowArray>& arrays, const AheadFn& ahead, const RowFn& row_fn,
             const FirstChangedFn& first_changed_by_update) {
  const bool flushed = DenormalsFlushed();
  int64_t work = (g.start.empty() ? 0 : g.start.back()) * d;
  for (const RowArray& a : arrays) work += v * a.width;
  const bool serial = work < kSerialFloats;
  if (mode == Untouched::kIdentity && flushed) mode = Untouched::kCheck;
  const auto first_changed = [&](int64_t q, int64_t end) {
    int64_t c = first_changed_by_update(q, end);
    if (flushed)
      for (const RowArray& a : arrays) c = FirstWithDenormal(a.src, a.width, q, c);
    return c;
  };
  bool copy = false;
  for (const RowArray& a : arrays) copy = copy || a.distinct();
  if (copy) {  // every byte of a distinct result is written below: map its fresh pages first,
               // on huge pages where the system gives them (pages.h: one fault per 2 MiB)
    for (const RowArray& a : arrays)
      if (a.distinct()) AdviseOutput(a.dst, static_cast<size_t>(v * a.width) * sizeof(float));
    ParallelRows(v, serial ? v : 1 << 16, [&](int64_t r0, int64_t r1) {
      for (const RowArray& a : arrays)
        if (a.distinct())
          PopulateForWrite(a.dst + r0 * a.width,
                           static_cast<size_t>((r1 - r0) * a.width) * sizeof(float));
    });
  }
  const GroupedRows rows = ResolveRows(g, upd);
  ParallelGroups(g, serial ? 1 : 0, [&](int64_t k0, int64_t k1) {
    ForGroupRange<float>(
        g, rows, d, k0, k1,
        [&](int64_t k) {
          ahead(g.rows[k]);
          PrefetchSources(arrays, g.rows[k]);
        },
        [&](int64_t k, const float* acc) { row_fn(g.rows[k], acc); });
  });
  if (mode == Untouched::kIdentity && !copy) return;
  const int64_t n = static_cast<int64_t>(g.rows.size());
  const std::vector<float> zero(static_cast<size_t>(d), 0.0f);
  ParallelRows(v, serial ? v : 4096, [&](int64_t r0, int64_t r1) {
    int64_t k = g.first_at_or_after(r0);
    for (int64_t r = r0; r < r1;) {
      const int64_t next = k < n ? std::min(g.rows[k], r1) : r1;  // untouched: [r, next)
      for (int64_t q = r; q < next;) {
        // [q, c): a run of rows left alone; c < next: a row the update changes
        const int64_t c = mode == Untouched::kDense   ? q
                          : mode == Untouched::kCheck ? first_changed(q, next)
                                                      : next;
        if (c > q)
          for (const RowArray& a : arrays)
            if (a.distinct())
              StreamCopy(a.dst + q * a.width, a.src + q * a.width,
                         static_cast<size_t>((c - q) * a.width) * sizeof(float));
        if (c < next) row_fn(c, zero.data());
        q = c + 1;
      }
      r = next + 1;  // skip the touched row (or step past r1)
      ++k;
    }
    StreamFence();
  });
}

// The same with every untouched row changed (`dense`) or none.
template <typename AheadFn, typename RowFn>
void ForRows(const RowGroups& g, const UpdateRows& upd, int64_t v, int64_t d, bool dense,
             const std::vector<RowArray>& arrays, const AheadFn& ahead, const RowFn& row_fn) {
  ForRows(g, upd, v, d, dense ? Untouched::kDense : Untouched::kIdentity, arrays, ahead, row_fn,
          [](int64_t, int64_t end) { return end; });
}

}  // namespace ember

#endif  // EMBER_XLA_NATIVE_SPARSE_UPDATE_H_
