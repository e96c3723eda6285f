// Padded max/min bags in XLA:CPU's two reduce semantics (padded_minmax.h): per bag, its
// accumulators for all D columns in a small buffer, the rows read once each, lane-wise in
// vectors of 8 floats (GCC vector extensions, AVX2 where the CPU has it) and the last D mod 8
// columns one at a time with the same operations.
#include "padded_minmax.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common.h"
#include "padded_parts.h"

namespace ember {
namespace {

template <int VL> struct Lanes;
template <> struct Lanes<1> {
  typedef float V __attribute__((vector_size(4)));
  typedef float VU __attribute__((vector_size(4), aligned(4)));
  typedef int32_t I __attribute__((vector_size(4)));
};
template <> struct Lanes<8> {
  typedef float V __attribute__((vector_size(32)));
  typedef float VU __attribute__((vector_size(32), aligned(4)));
  typedef int32_t I __attribute__((vector_size(32)));
};

constexpr int32_t kSign = INT32_MIN;
// YNNPACK reduces the bag axis in tiles of floor(kYnnTileValues / D) rows, each in groups of 4
// from its first row (padded_minmax.h).
constexpr int64_t kYnnTileValues = 32768;

// Kind 1: max, 2: min. `zero` is +0 the compiler cannot see: v == zero holds for +-0 and,
// under the caller's DAZ, for denormals, which become the zero of their sign.
template <int VL>
__attribute__((always_inline)) inline typename Lanes<VL>::V Load(const float* p,
                                                                 typename Lanes<VL>::V zero) {
  using L = Lanes<VL>;
  const typename L::V v = *reinterpret_cast<const typename L::VU*>(p);
  const typename L::I bits = (typename L::I)v;
  return (typename L::V)((v == zero) ? (bits & kSign) : bits);
}

// vmaxps(a, b) / vminps(a, b): a > b ? a : b (a < b ? a : b); NaN or equal give b.
template <int VL, int Kind>
__attribute__((always_inline)) inline typename Lanes<VL>::V Ynn(typename Lanes<VL>::V a,
                                                                typename Lanes<VL>::V b) {
  using I = typename Lanes<VL>::I;
  const I pick_a = Kind == 1 ? (a > b) : (a < b);
  return (typename Lanes<VL>::V)(pick_a ? (I)a : (I)b);
}

// XLA's reduce loop step acc = op(acc, v) (padded_minmax.h).
template <int VL, int Kind>
__attribute__((always_inline)) inline typename Lanes<VL>::V Loop(typename Lanes<VL>::V a,
                                                                 typename Lanes<VL>::V v) {
  using I = typename Lanes<VL>::I;
  const I ia = (I)a, iv = (I)v;
  I r = (Kind == 1 ? (a > v) : (a < v)) ? ia : iv;
  r = (a == v) ? (Kind == 1 ? (ia & iv) : (ia | iv)) : r;
  const I nan_v = Kind == 1 ? ((iv & ~kSign) | (iv & ia & kSign)) : (iv | (ia & kSign));
  r = (v != v) ? nan_v : r;
  r = (a != a) ? ia : r;
  return (typename Lanes<VL>::V)r;
}

// Columns [c0, c1) of one bag, VL at a time; rows[p] points at lookup p's row, `fill` at
// fill mode's NaN row (an out-of-range lookup).
template <int VL, int Kind, MinMaxOrder Order>
__attribute__((always_inline)) inline void Columns(const float* const* rows, const float* fill,
                                                   int64_t width, int64_t tile, int64_t c0,
                                                   int64_t c1, float init, float zero_f,
                                                   float* __restrict out) {
  using V = typename Lanes<VL>::V;
  using VU = typename Lanes<VL>::VU;
  V zero, start, qnan;
  for (int l = 0; l < VL; ++l) zero[l] = zero_f, start[l] = init, qnan[l] = fill[0];
  for (int64_t c = c0; c + VL <= c1; c += VL) {
    V acc = start;
    if constexpr (Order == MinMaxOrder::kReduceLoop) {
      // LLVM folds max/min(acc, fill's NaN constant) to the NaN: it replaces any acc
      for (int64_t p = 0; p < width; ++p)
        acc = rows[p] == fill ? qnan : Loop<VL, Kind>(acc, Load<VL>(rows[p] + c, zero));
    } else {
      for (int64_t t0 = 0; t0 < width; t0 += tile) {
        const int64_t t1 = std::min(width, t0 + tile);
        for (int64_t g = t0; g < t1; g += 4) {
          const V a0 = Load<VL>(rows[g] + c, zero);
          V grp = a0;
          for (int64_t i = 1; i < 4; ++i)
            grp = Ynn<VL, Kind>(grp, g + i < t1 ? Load<VL>(rows[g + i] + c, zero) : a0);
          acc = Ynn<VL, Kind>(grp, acc);
        }
      }
    }
    *reinterpret_cast<VU*>(out + c) = acc;
  }
}

template <int Kind, MinMaxOrder Order>
void BagsBaseline(const float* const* rows, const float* fill, int64_t width, int64_t tile,
                  int64_t d, float init, float zero, float* out) {
  const int64_t d8 = d - d % 8;
  Columns<8, Kind, Order>(rows, fill, width, tile, 0, d8, init, zero, out);
  Columns<1, Kind, Order>(rows, fill, width, tile, d8, d, init, zero, out);
}

#if defined(__x86_64__)
template <int Kind, MinMaxOrder Order>
__attribute__((target("avx2"))) void BagsAvx2(const float* const* rows, const float* fill,
                                              int64_t width, int64_t tile, int64_t d,
                                              float init, float zero, float* out) {
  const int64_t d8 = d - d % 8;
  Columns<8, Kind, Order>(rows, fill, width, tile, 0, d8, init, zero, out);
  Columns<1, Kind, Order>(rows, fill, width, tile, d8, d, init, zero, out);
}

bool HasAvx2() {
  static const bool yes = __builtin_cpu_supports("avx2") != 0;
  return yes;
}
#endif

template <int Kind, MinMaxOrder Order>
void Part(const float* table, const float* nan_row, const Plan& plan, int64_t b0, int64_t b1,
          int64_t width, int64_t d, float init, float zero, float* out) {
  constexpr int64_t kAhead = 16;  // lookups whose rows are prefetched ahead
  const int64_t tile = d > 0 ? std::max<int64_t>(1, kYnnTileValues / d) : 1;
  std::vector<const float*> rows(static_cast<size_t>(width));
  const int64_t k_end = b1 * width;
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t* src = plan.src.data() + b * width;
    for (int64_t p = 0; p < width; ++p) {
      rows[p] = RowPointer(table, nan_row, src[p], d);
      const int64_t k = b * width + p + kAhead;
      if (k < k_end && plan.src[k] >= 0)
        PrefetchLines<EMBER_PREFETCH_LOCALITY>(table + plan.src[k] * d, d * 4);
    }
#if defined(__x86_64__)
    if (HasAvx2()) {
      BagsAvx2<Kind, Order>(rows.data(), nan_row, width, tile, d, init, zero, out + b * d);
      continue;
    }
#endif
    BagsBaseline<Kind, Order>(rows.data(), nan_row, width, tile, d, init, zero,
                              out + b * d);
  }
}

template <int Kind, MinMaxOrder Order>
void Run(const float* table, const float* nan_row, const Plan& plan, int64_t bags,
         int64_t width, int64_t d, float init, float* out) {
  volatile float opaque_zero = 0.0f;
  const float zero = opaque_zero;
  RunBagParts(bags, width, d, [&](int64_t b0, int64_t b1) {
    Part<Kind, Order>(table, nan_row, plan, b0, b1, width, d, init, zero, out);
  });
}

}  // namespace

ffi::Error RunPaddedMinMax(const ffi::AnyBuffer& table, const Plan& plan, int64_t bags,
                           int64_t width, const Options& opt, MinMaxOrder order,
                           ffi::AnyBuffer& out) {
  if (table.element_type() != ffi::DataType::F32 || out.element_type() != ffi::DataType::F32)
    return ffi::Error::InvalidArgument(
        "ember.padded_bag: the reduce_loop / ynn_groups4 orders need an f32 table and result");
  if (opt.combiner != Combiner::kMax && opt.combiner != Combiner::kMin)
    return ffi::Error::InvalidArgument(
        "ember.padded_bag: the reduce_loop / ynn_groups4 orders are for max/min bags");
  if (opt.weighted || opt.masked)
    return ffi::Error::InvalidArgument(
        "ember.padded_bag: the reduce_loop / ynn_groups4 orders take unweighted, unmasked bags");
  const int64_t d = table.dimensions()[1];
  if (d == 0 || bags == 0) return ffi::Error::Success();  // nothing to write
  const float* t = static_cast<const float*>(table.untyped_data());
  float* o = static_cast<float*>(out.untyped_data());
  std::vector<float> nan_row(static_cast<size_t>(2 * d), 0.0f);  // D NaNs, D zeros
  std::fill(nan_row.begin(), nan_row.begin() + d, std::nanf(""));
  const float init = static_cast<float>(opt.init);
  const bool max = opt.combiner == Combiner::kMax;
  if (order == MinMaxOrder::kReduceLoop) {
    if (max) Run<1, MinMaxOrder::kReduceLoop>(t, nan_row.data(), plan, bags, width, d, init, o);
    else Run<2, MinMaxOrder::kReduceLoop>(t, nan_row.data(), plan, bags, width, d, init, o);
  } else {
    if (max) Run<1, MinMaxOrder::kYnnGroups4>(t, nan_row.data(), plan, bags, width, d, init, o);
    else Run<2, MinMaxOrder::kYnnGroups4>(t, nan_row.data(), plan, bags, width, d, init, o);
  }
  return ffi::Error::Success();
}

}  // namespace ember
