// Internal to reduce.cc: a reduce job (one plan's lookups over one table into one result),
// how a lookup's row is found and prefetched, and the hot sum loop of f32 tables whose rows
// are kept in vector registers. In an unnamed namespace: only reduce.cc includes it.
#ifndef EMBER_XLA_NATIVE_REDUCE_SUM_ROWS_H_
#define EMBER_XLA_NATIVE_REDUCE_SUM_ROWS_H_

#include <cstdint>

#include "common.h"
#include "reduce.h"
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

// The hot case (f32 table and result, unweighted sum, D a multiple of the vector width): each
// output row's accumulator lives in vector registers (up to NV vectors of VL floats per pass
// over the row's lookups; wider rows take several passes, the later ones hitting cache), so a
// lookup costs one load+add per vector and the core keeps many row loads in flight. Lane-wise
// IEEE adds in lookup order: the same bits as the scalar loop.
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

template <int VL, int NV, typename Rows>
__attribute__((always_inline)) inline void SumChunk(const Job<float, float>& job,
                                                    const Rows& rows0, int64_t r0, int64_t r1,
                                                    int64_t c0, bool prefetch, int64_t k_limit,
                                                    bool prologue, bool keep) {
  using V = typename Vec<VL>::V;
  using VU = typename Vec<VL>::VU;
  const int64_t d = job.d;
  const int64_t* __restrict row_ptr = job.plan->row_ptr.data();
  const int64_t k_end = k_limit;  // prefetch runs ahead up to the end of the part
  const int64_t row_bytes = d * static_cast<int64_t>(sizeof(float));
  V start;
  for (int l = 0; l < VL; ++l) start[l] = job.init;
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
}

// D = VL * (16 a + 8 b + 4 c + 2 e + f) floats, in passes of 16, 8, 4, 2, 1 vectors. A row
// wider than one pass is finished (all its passes) before the next row starts: the later
// passes re-read the row's lookups from L1/L2, and only the first pass prefetches (ahead
// across rows, to the end of the part). Passes over all rows of a part instead re-read every
// lookup from DRAM (measured: segment_max D=256 at break-even with XLA).
template <int VL, int NVMax, typename Rows>
__attribute__((always_inline)) inline void SumRowsWith(const Job<float, float>& job,
                                                       const Rows& rows, int64_t r0, int64_t r1) {
  const int64_t d = job.d;
  const int64_t k_end = job.plan->row_ptr[r1];
  const bool one_pass = d / VL <= NVMax;
  for (int64_t r = r0; r < r1; r = one_pass ? r1 : r + 1) {
    const int64_t re = one_pass ? r1 : r + 1;
    int64_t c0 = 0;
    while (c0 < d) {
      const int64_t left = (d - c0) / VL;
      const bool first = c0 == 0, pro = first && r == r0;
      int64_t nv = 1;
      if (NVMax >= 16 && left >= 16)
        SumChunk<VL, (NVMax >= 16 ? 16 : 1)>(job, rows, r, re, c0, first, k_end, pro,
                                             !one_pass), nv = 16;
      else if (left >= 8) SumChunk<VL, 8>(job, rows, r, re, c0, first, k_end, pro, !one_pass), nv = 8;
      else if (left >= 4) SumChunk<VL, 4>(job, rows, r, re, c0, first, k_end, pro, !one_pass), nv = 4;
      else if (left >= 2) SumChunk<VL, 2>(job, rows, r, re, c0, first, k_end, pro, !one_pass), nv = 2;
      else SumChunk<VL, 1>(job, rows, r, re, c0, first, k_end, pro, !one_pass);
      c0 += nv * VL;
    }
  }
}

// The rows of job's plan through the fastest resolver that gives ResolveOne's rows.
template <int VL, int NVMax>
__attribute__((always_inline)) inline void SumRowsVector(const Job<float, float>& job,
                                                         int64_t r0, int64_t r1) {
  const Plan& plan = *job.plan;
  const Options& opt = plan.opt;
  const bool raw32 = plan.raw != nullptr && !plan.raw64 &&
                     (!opt.index32 || plan.n_rows <= int64_t{INT32_MAX});
  if (!raw32) {
    SumRowsWith<VL, NVMax>(job, PlanRows{&plan, job.table, job.nan_row, job.d}, r0, r1);
    return;
  }
  const int32_t* ids = static_cast<const int32_t*>(plan.raw);
  const int64_t n = plan.n_rows;
  if (opt.clip && opt.wrap_negative)
    SumRowsWith<VL, NVMax>(job, Raw32Rows<true, true>{ids, n, job.table, job.nan_row, job.d},
                           r0, r1);
  else if (opt.clip)
    SumRowsWith<VL, NVMax>(job, Raw32Rows<true, false>{ids, n, job.table, job.nan_row, job.d},
                           r0, r1);
  else if (opt.wrap_negative)
    SumRowsWith<VL, NVMax>(job, Raw32Rows<false, true>{ids, n, job.table, job.nan_row, job.d},
                           r0, r1);
  else
    SumRowsWith<VL, NVMax>(job, Raw32Rows<false, false>{ids, n, job.table, job.nan_row, job.d},
                           r0, r1);
}

}  // namespace
}  // namespace ember

#endif  // EMBER_XLA_NATIVE_REDUCE_SUM_ROWS_H_
