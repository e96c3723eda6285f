// The lane-wise selections of the vectorized max/min bags of f32 tables and results
// (unweighted): the loop is reduce_vector_rows.h's, shared with the sum.
//
// The scalar loop in reduce.cc computes acc = XlaMax(acc * one, v * one) per element, with
// compare-and-branch code the compiler does not vectorize (~3.6 ns per element here, 5-10x
// slower than XLA's own scatter for segment_max). This does the same lane-wise: the same
// multiply by a `one` the compiler cannot fold (so denormals flush exactly as XLA's hardware
// max/min flush them under DAZ), then the same selection as common.h's XlaMax / XlaMin, written
// with masks: a NaN accumulator wins, else a NaN row value, else on equality the bitwise AND
// (max: +0 over -0) or OR (min: -0 over +0) of the two, which for equal non-zero values is the
// value itself, else the larger (smaller). Same bits as the scalar loop in every case.
//
// While no NaN is met the selection is three instructions: for non-NaN a and b, max(a, b) is
// the AND of the hardware maxps(a, b) = (a > b ? a : b) and maxps(b, a) (unequal: both are the
// larger; equal: a AND b, the rule above), min the OR of two minps. The loop also keeps, per
// lane, any NaN row value it meets; when a chunk of output rows met one (rare), its rows are
// computed again with the full selection. A NaN init takes the full selection from
// the start.
#ifndef EMBER_XLA_NATIVE_REDUCE_MINMAX_H_
#define EMBER_XLA_NATIVE_REDUCE_MINMAX_H_

#include <cstdint>

#include "common.h"

namespace ember {
namespace minmax {

template <int VL> struct IVec;
template <> struct IVec<4> { typedef int32_t V __attribute__((vector_size(16))); };
template <> struct IVec<8> { typedef int32_t V __attribute__((vector_size(32))); };
template <> struct IVec<16> { typedef int32_t V __attribute__((vector_size(64))); };

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

// The NaN-free selection (see the top of this file): GCC emits `x > y ? x : y` on vectors as
// the hardware maxps(x, y) (and `<` as minps), whose semantics it is exactly.
template <int VL, int Kind, typename V>
__attribute__((always_inline)) inline void SelectNoNan(V& a, const V& b) {
  using VI = typename IVec<VL>::V;
  const V l = Kind == 1 ? (a > b ? a : b) : (a < b ? a : b);
  const V r = Kind == 1 ? (b > a ? b : a) : (b < a ? b : a);
  a = (V)(Kind == 1 ? ((VI)l & (VI)r) : ((VI)l | (VI)r));
}

}  // namespace minmax
}  // namespace ember

#endif  // EMBER_XLA_NATIVE_REDUCE_MINMAX_H_
