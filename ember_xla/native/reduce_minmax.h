// Vectorized max/min bags for f32 tables and results (unweighted), included by reduce.cc.
//
// The scalar loop in reduce.cc computes acc = XlaMax(acc * one, v * one) per element, with
// compare-and-branch code the compiler does not vectorize (~3.6 ns per element here, 5-10x
// slower than XLA's own scatter for segment_max). This does the same lane-wise: the same
// multiply by a `one` the compiler cannot fold (so denormals flush exactly as XLA's hardware
// max/min flush them under DAZ), then the same selection as common.h's XlaMax / XlaMin, written
// with masks: a NaN accumulator wins, else a NaN row value, else on equality the bitwise AND
// (max: +0 over -0) or OR (min: -0 over +0) of the two, which for equal non-zero values is the
// value itself, else the larger (smaller). Same bits as the scalar loop in every case.
#ifndef EMBER_XLA_NATIVE_REDUCE_MINMAX_H_
#define EMBER_XLA_NATIVE_REDUCE_MINMAX_H_

#include <cstdint>

#include "common.h"
#include "reduce_parts.h"

namespace ember {
namespace minmax {

template <int VL> struct IVec;
template <> struct IVec<4> { typedef int32_t V __attribute__((vector_size(16))); };
template <> struct IVec<8> { typedef int32_t V __attribute__((vector_size(32))); };

// Kind 1: a = XlaMax(a, b); Kind 2: a = XlaMin(a, b), lane-wise (by reference: no vector ABI).
template <int VL, int Kind, typename V>
__attribute__((always_inline)) inline void Select(V& a, const V& b) {
  using VI = typename IVec<VL>::V;
  const VI ia = (VI)a, ib = (VI)b;  // GCC vector casts reinterpret the bits
  const VI pick_a = Kind == 1 ? (a > b) : (a < b);
  VI r = pick_a ? ia : ib;
  r = (a == b) ? (Kind == 1 ? (ia & ib) : (ia | ib)) : r;
  r = (b != b) ? ib : r;
  r = (a != a) ? ia : r;
  a = (V)r;
}

// Rows [r0, r1), columns [c0, c0 + NV * VL): accumulators in registers over each row's lookups.
template <int VL, int NV, int Kind, typename Job, typename VecT>
__attribute__((always_inline)) inline void Chunk(const Job& job, int64_t r0, int64_t r1,
                                                 int64_t c0, bool prefetch, float one,
                                                 int64_t ahead, int64_t k_limit,
                                                 bool prologue, bool keep) {
  using V = typename VecT::V;
  using VU = typename VecT::VU;
  const int64_t d = job.d;
  const int64_t* __restrict row_ptr = job.plan->row_ptr.data();
  const auto* plan = job.plan;
  const int64_t k_end = k_limit;  // prefetch runs ahead up to the end of the part
  const int64_t row_bytes = d * static_cast<int64_t>(sizeof(float));
  auto row_of = [&](int64_t k) -> const float* {
    const int64_t r = plan->Row(k);
    return RowPointer(job.table, job.nan_row, r, d);
  };
  auto prefetch_row = [&](const float* p) {
    const char* c = reinterpret_cast<const char*>(p);
    // several passes re-read the row from cache: keep it there (prefetcht0), else the
    // single-pass hint (reduce_parts.h)
    if (keep) PrefetchLines<3>(c, row_bytes);
    else PrefetchLines<EMBER_PREFETCH_LOCALITY>(c, row_bytes);
  };
  V start, ones;
  for (int l = 0; l < VL; ++l) start[l] = job.init, ones[l] = one;
  if (prefetch && prologue)
    for (int64_t k = row_ptr[r0]; k < row_ptr[r0] + ahead && k < k_end; ++k)
      prefetch_row(row_of(k));
  for (int64_t r = r0; r < r1; ++r) {
    V acc[NV];
    for (int i = 0; i < NV; ++i) acc[i] = start;
    for (int64_t k = row_ptr[r], k1 = row_ptr[r + 1]; k < k1; ++k) {
      if (prefetch && k + ahead < k_end) prefetch_row(row_of(k + ahead));
      const float* row = row_of(k) + c0;
      for (int i = 0; i < NV; ++i) {
        const V v = *reinterpret_cast<const VU*>(row + i * VL) * ones;
        acc[i] *= ones;
        Select<VL, Kind>(acc[i], v);
      }
    }
    float* o = job.out + r * job.out_stride + c0;
    for (int i = 0; i < NV; ++i) *reinterpret_cast<VU*>(o + i * VL) = acc[i];
  }
}

// D = VL * (8 a + 4 b + 2 c + e) floats, in passes of 8, 4, 2, 1 vectors; a row wider than
// one pass is finished before the next row starts (see SumRowsVector in reduce_sum_rows.h).
template <int VL, int Kind, typename Job, typename VecT>
__attribute__((always_inline)) inline void Rows(const Job& job, int64_t r0, int64_t r1,
                                                float one, int64_t ahead) {
  const int64_t k_end = job.plan->row_ptr[r1];
  const bool one_pass = job.d / VL <= 8;
  for (int64_t r = r0; r < r1; r = one_pass ? r1 : r + 1) {
    const int64_t re = one_pass ? r1 : r + 1;
    int64_t c0 = 0;
    while (c0 < job.d) {
      const int64_t left = (job.d - c0) / VL;
      const bool first = c0 == 0, pro = first && r == r0;
      int64_t nv = 1;
      if (left >= 8)
        Chunk<VL, 8, Kind, Job, VecT>(job, r, re, c0, first, one, ahead, k_end, pro, !one_pass), nv = 8;
      else if (left >= 4)
        Chunk<VL, 4, Kind, Job, VecT>(job, r, re, c0, first, one, ahead, k_end, pro, !one_pass), nv = 4;
      else if (left >= 2)
        Chunk<VL, 2, Kind, Job, VecT>(job, r, re, c0, first, one, ahead, k_end, pro, !one_pass), nv = 2;
      else Chunk<VL, 1, Kind, Job, VecT>(job, r, re, c0, first, one, ahead, k_end, pro, !one_pass);
      c0 += nv * VL;
    }
  }
}

}  // namespace minmax
}  // namespace ember

#endif  // EMBER_XLA_NATIVE_REDUCE_MINMAX_H_
