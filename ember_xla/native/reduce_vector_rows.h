// Internal to reduce.cc: a reduce job (one plan's lookups over one table into one result),
// how a lookup's row is found and prefetched, and the hot sum / max / min loop of f32 tables
// whose rows are kept in vector registers. In an unnamed namespace: only reduce.cc includes it.
#ifndef EMBER_XLA_NATIVE_REDUCE_VECTOR_ROWS_H_
#define EMBER_XLA_NATIVE_REDUCE_VECTOR_ROWS_H_

#include <cstdint>

#include "common.h"
#include "reduce.h"
#include "reduce_minmax.h"
#include "reduce_parts.h"

#ifndef EMBER_PREFETCH_LOOKUPS
#define EMBER_PREFETCH_LOOKUPS 16
#endif

namespace ember {
namespace {

// Software prefetch distance in lookups (16 like FBGEMM; 8-16 measured alike here, 4 worse).
constexpr int64_t kPrefetchAhead = EMBER_PREFETCH_LOOKUPS;

// W: 0 unweighted, 1 weights of T's type (product rounded to T), 2 weights of O's type.
template <typename T, typename O>
struct Job {
  const T* table;
  const T* nan_row;    // special rows (plan.h RowPointer): D NaNs (fill misses), D zeros (masked)
  const void* weights;  // nullptr unless weighted
  const Plan* plan;
  Combiner combiner;
  int64_t d;
  float init;  // init rounded to O, as float
  O* out;
  int64_t out_stride;  // elements from one output row to the next (d, or sum D when the
                       // result is the tables' concatenated [rows, sum D] layout)
  bool fma = false;    // f32 weighted: acc = fma(row, weight, acc) (Options::fused_multiply_add)
};

template <typename T, typename O>
inline const T* RowOf(const Job<T, O>& job, int64_t k) {
  const int64_t r = job.plan->Row(k);
  return RowPointer(job.table, job.nan_row, r, job.d);
}

inline void PrefetchRow(const char* p, int64_t bytes) {
  PrefetchLines<EMBER_PREFETCH_LOCALITY>(p, bytes);
}

// Rows read in several passes (wider than the registers hold) are re-read from cache after
// the first pass: prefetch them into all cache levels (prefetcht0), not non-temporally.
#ifndef EMBER_PREFETCH_LOCALITY_MULTIPASS
#define EMBER_PREFETCH_LOCALITY_MULTIPASS 3
#endif
inline void PrefetchRowKeep(const char* p, int64_t bytes) {
  PrefetchLines<EMBER_PREFETCH_LOCALITY_MULTIPASS>(p, bytes);
}

// The hot case (f32 table and result, unweighted sum, max or min, D a multiple of the vector
// width): each output row's accumulator lives in vector registers (up to NV vectors of VL
// floats per pass over the row's lookups; wider rows take several passes, the later ones
// hitting cache), so a lookup costs one load+add per vector (a few instructions for max/min:
// reduce_minmax.h) and the core keeps many row loads in flight. Lane-wise IEEE adds (XLA's
// selections) in lookup order: the same bits as the scalar loop.
template <int VL> struct Vec;
template <> struct Vec<4> {
  typedef float V __attribute__((vector_size(16)));
  typedef float VU __attribute__((vector_size(16), aligned(4)));
};
template <> struct Vec<8> {
  typedef float V __attribute__((vector_size(32)));
  typedef float VU __attribute__((vector_size(32), aligned(4)));
};
template <> struct Vec<16> {
  typedef float V __attribute__((vector_size(64)));
  typedef float VU __attribute__((vector_size(64), aligned(4)));
};

// How the hot loop finds a lookup's row: rows(k) is the address of column c0 of lookup k's
// row (the table and NaN row shifted by c0 once, so the vector loads use constant offsets).
// Any plan: Plan::Row per lookup.
inline const float* Shift(const float* p, int64_t c0) { return p ? p + c0 : p; }  // clip: null
struct PlanRows {
  const Plan* plan;
  const float* table;
  const float* nan_row;
  int64_t d;
  PlanRows Shifted(int64_t c0) const { return {plan, table + c0, Shift(nan_row, c0), d}; }
  const float* operator()(int64_t k) const {
    const int64_t r = plan->Row(k);
    return RowPointer(table, nan_row, r, d);
  }
};

// A folded plan over s32 ids whose 32-bit truncation is the identity (every case but a fill
// or wrapped lookup into a table of more than 2^31 - 1 rows): the lookup resolved with the
// plan's options fixed at compile time, branch-free in clip mode. Same rows as ResolveOne.
template <bool Clip, bool Wrap>
struct Raw32Rows {
  const int32_t* ids;
  int64_t n;
  const float* table;
  const float* nan_row;
  int64_t d;
  Raw32Rows Shifted(int64_t c0) const { return {ids, n, table + c0, Shift(nan_row, c0), d}; }
  const float* operator()(int64_t k) const {
    int64_t i = ids[k];
    if (Wrap) i = i < 0 ? i + n : i;
    if (Clip) {
      i = i < 0 ? 0 : i;
      i = i >= n ? n - 1 : i;
      return table + i * d;
    }
    return static_cast<uint64_t>(i) >= static_cast<uint64_t>(n) ? nan_row : table + i * d;
  }
};

// Kind: 0 sum, 1 max, 2 min. `one` is the opaque 1 max and min multiply row values by (so
// denormals flush as XLA's hardware max/min flush them; reduce_minmax.h); `no_nan_init`: the
// NaN-free selection may run (a NaN init takes the full selection throughout).
template <int VL, int NV, int Kind, typename Rows>
__attribute__((always_inline)) inline void Chunk(const Job<float, float>& job,
                                                 const Rows& rows0, int64_t r0, int64_t r1,
                                                 int64_t c0, bool prefetch, int64_t k_limit,
                                                 bool prologue, bool keep, float one,
                                                 bool no_nan_init) {
  using V = typename Vec<VL>::V;
  using VU = typename Vec<VL>::VU;
  const int64_t d = job.d;
  const int64_t* __restrict row_ptr = job.plan->row_ptr.data();
  const int64_t k_end = k_limit;  // prefetch runs ahead up to the end of the part
  const int64_t row_bytes = d * static_cast<int64_t>(sizeof(float));
  V start, ones;
  for (int l = 0; l < VL; ++l) start[l] = job.init, ones[l] = one;
  // max / min: the accumulator is multiplied by `one` once. Every value a selection returns
  // (either operand, or for equal values their AND / OR) is already a product by `one`, and
  // that product is idempotent (a flushed denormal stays zero, a quiet NaN the same NaN), so
  // the scalar loop's `acc * one` at every step changes no bit after the first.
  if constexpr (Kind != 0) start *= ones;
  const Rows rows = rows0.Shifted(c0);
  // This chunk is the whole row (the usual D = VL * NV): its lines are prefetched by an
  // unrolled sequence of compile-time length.
  constexpr int64_t kChunkBytes = int64_t{NV} * VL * static_cast<int64_t>(sizeof(float));
  const bool whole = c0 == 0 && d == NV * VL;
  auto pf = [&](int64_t k) {
    const char* p = reinterpret_cast<const char*>(rows0(k));
    if (whole) {
      PrefetchLines<EMBER_PREFETCH_LOCALITY>(p, kChunkBytes);
    } else if (keep) {
      PrefetchRowKeep(p, row_bytes);
    } else {
      PrefetchRow(p, row_bytes);
    }
  };
  if (prefetch && prologue) {
    for (int64_t k = row_ptr[r0]; k < row_ptr[r0] + kPrefetchAhead && k < k_end; ++k) pf(k);
  }
  // The sum's loop and the two selections' loops are written out: one helper templated on the
  // step made GCC's sum loop 1.45x slower (B=2048 P=20 D=128, 0.29 -> 0.42 ms).
  if constexpr (Kind == 0) {
    for (int64_t r = r0; r < r1; ++r) {
      V acc[NV];
      for (int i = 0; i < NV; ++i) acc[i] = start;
      for (int64_t k = row_ptr[r], k1 = row_ptr[r + 1]; k < k1; ++k) {
        if (prefetch && k + kPrefetchAhead < k_end) pf(k + kPrefetchAhead);
        const float* row = rows(k);
        for (int i = 0; i < NV; ++i) acc[i] += *reinterpret_cast<const VU*>(row + i * VL);
      }
      float* o = job.out + r * job.out_stride + c0;
      for (int i = 0; i < NV; ++i) *reinterpret_cast<VU*>(o + i * VL) = acc[i];
    }
    return;
  }
  if (no_nan_init) {  // the NaN-free selection, then a check over the chunk's rows
    V nan = start;    // becomes a NaN in every lane that met one
    for (int64_t r = r0; r < r1; ++r) {
      V acc[NV];
      for (int i = 0; i < NV; ++i) acc[i] = start;
      for (int64_t k = row_ptr[r], k1 = row_ptr[r + 1]; k < k1; ++k) {
        if (prefetch && k + kPrefetchAhead < k_end) pf(k + kPrefetchAhead);
        const float* row = rows(k);
        for (int i = 0; i < NV; ++i) {
          const V v = *reinterpret_cast<const VU*>(row + i * VL) * ones;
          nan = (v != v) ? v : nan;  // a select of floats: one masked move
          minmax::SelectNoNan<VL, Kind>(acc[i], v);
        }
      }
      float* o = job.out + r * job.out_stride + c0;
      for (int i = 0; i < NV; ++i) *reinterpret_cast<VU*>(o + i * VL) = acc[i];
    }
    bool met = false;
    for (int l = 0; l < VL; ++l) met |= nan[l] != nan[l];
    if (!met) return;
  }
  // Every NaN rule (a NaN init, or the chunk's lookups met a NaN: its rows again, overwriting
  // what the NaN-free selection wrote).
  for (int64_t r = r0; r < r1; ++r) {
    V acc[NV];
    for (int i = 0; i < NV; ++i) acc[i] = start;
    for (int64_t k = row_ptr[r], k1 = row_ptr[r + 1]; k < k1; ++k) {
      if (prefetch && k + kPrefetchAhead < k_end) pf(k + kPrefetchAhead);
      const float* row = rows(k);
      for (int i = 0; i < NV; ++i) {
        const V v = *reinterpret_cast<const VU*>(row + i * VL) * ones;
        minmax::Select<VL, Kind>(acc[i], v);
      }
    }
    float* o = job.out + r * job.out_stride + c0;
    for (int i = 0; i < NV; ++i) *reinterpret_cast<VU*>(o + i * VL) = acc[i];
  }
}

// D = VL * (16 a + 8 b + 4 c + 2 e + f) floats, in passes of 16 (when NVMax allows), 8, 4, 2,
// 1 vectors. A row wider than one pass is finished (all its passes) before the next row
// starts: the later passes re-read the row's lookups from L1/L2, and only the first pass
// prefetches (ahead across rows, to the end of the part). Passes over all rows of a part
// instead re-read every lookup from DRAM (measured: segment_max D=256 at break-even with XLA).
template <int VL, int NVMax, int Kind, typename Rows>
__attribute__((always_inline)) inline void RowsWith(const Job<float, float>& job,
                                                    const Rows& rows, int64_t r0, int64_t r1,
                                                    float one) {
  const int64_t d = job.d;
  const int64_t k_end = job.plan->row_ptr[r1];
  const bool one_pass = d / VL <= NVMax;
  const bool no_nan_init = job.init == job.init;
  for (int64_t r = r0; r < r1; r = one_pass ? r1 : r + 1) {
    const int64_t re = one_pass ? r1 : r + 1;
    int64_t c0 = 0;
    while (c0 < d) {
      const int64_t left = (d - c0) / VL;
      const bool first = c0 == 0, pro = first && r == r0, keep = !one_pass;
      int64_t nv = 1;
      if (NVMax >= 16 && left >= 16)
        Chunk<VL, (NVMax >= 16 ? 16 : 1), Kind>(job, rows, r, re, c0, first, k_end, pro, keep,
                                                one, no_nan_init), nv = 16;
      else if (left >= 8)
        Chunk<VL, 8, Kind>(job, rows, r, re, c0, first, k_end, pro, keep, one, no_nan_init), nv = 8;
      else if (left >= 4)
        Chunk<VL, 4, Kind>(job, rows, r, re, c0, first, k_end, pro, keep, one, no_nan_init), nv = 4;
      else if (left >= 2)
        Chunk<VL, 2, Kind>(job, rows, r, re, c0, first, k_end, pro, keep, one, no_nan_init), nv = 2;
      else Chunk<VL, 1, Kind>(job, rows, r, re, c0, first, k_end, pro, keep, one, no_nan_init);
      c0 += nv * VL;
    }
  }
}

// The rows of job's plan through the fastest resolver that gives ResolveOne's rows.
template <int VL, int NVMax, int Kind>
__attribute__((always_inline)) inline void VectorRows(const Job<float, float>& job, int64_t r0,
                                                      int64_t r1, float one) {
  const Plan& plan = *job.plan;
  const Options& opt = plan.opt;
  const bool raw32 = plan.raw != nullptr && !plan.raw64 &&
                     (!opt.index32 || plan.n_rows <= int64_t{INT32_MAX});
  const float* t = job.table;
  const float* nan_row = job.nan_row;
  const int64_t d = job.d;
  if (!raw32) {
    RowsWith<VL, NVMax, Kind>(job, PlanRows{&plan, t, nan_row, d}, r0, r1, one);
    return;
  }
  const int32_t* ids = static_cast<const int32_t*>(plan.raw);
  const int64_t n = plan.n_rows;
  if (opt.clip && opt.wrap_negative)
    RowsWith<VL, NVMax, Kind>(job, Raw32Rows<true, true>{ids, n, t, nan_row, d}, r0, r1, one);
  else if (opt.clip)
    RowsWith<VL, NVMax, Kind>(job, Raw32Rows<true, false>{ids, n, t, nan_row, d}, r0, r1, one);
  else if (opt.wrap_negative)
    RowsWith<VL, NVMax, Kind>(job, Raw32Rows<false, true>{ids, n, t, nan_row, d}, r0, r1, one);
  else
    RowsWith<VL, NVMax, Kind>(job, Raw32Rows<false, false>{ids, n, t, nan_row, d}, r0, r1, one);
}

}  // namespace
}  // namespace ember

#endif  // EMBER_XLA_NATIVE_REDUCE_VECTOR_ROWS_H_
