// Padded max/min bags in XLA:CPU's two reduce semantics (padded_minmax.h): per bag, a chunk of
// columns at a time, its accumulators in registers (several vectors side by side, so the
// lookups' dependent steps overlap and each row's chunk is read as whole cache lines), then the
// last columns one vector and one float at a time with the same lane operations (GCC vector
// extensions: 16 floats in the AVX-512 clone, 8 in the AVX2 and baseline ones).
#include "padded_minmax.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common.h"
#include "isa.h"
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
template <> struct Lanes<16> {
  typedef float V __attribute__((vector_size(64)));
  typedef float VU __attribute__((vector_size(64), aligned(4)));
  typedef int32_t I __attribute__((vector_size(64)));
};

constexpr int32_t kSign = INT32_MIN;
// YNNPACK reduces the bag axis in tiles of floor(kYnnTileValues / D) rows, each in groups of 4
// from its first row (padded_minmax.h).
constexpr int64_t kYnnTileValues = 32768;

// The lane helpers below take and return vectors by value; they are always inlined into their
// clones, so no call passes a vector and GCC's note on the vector ABI does not apply (it is
// given where templates are instantiated, the end of the file: ignored for the whole file).
#pragma GCC diagnostic ignored "-Wpsabi"

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

// Columns [c0, c1) of one bag, NV vectors of VL at a time (while NV * VL of them are left);
// rows[p] points at lookup p's row, `fill` at fill mode's NaN row (an out-of-range lookup).
// Each lane sees the same operations in the same order whatever VL and NV are. Returns the
// first column not done.
template <int VL, int NV, int Kind, MinMaxOrder Order>
__attribute__((always_inline)) inline int64_t Columns(const float* const* rows,
                                                      const float* fill, int64_t width,
                                                      int64_t tile, int64_t c0, int64_t c1,
                                                      float init, float zero_f,
                                                      float* __restrict out) {
  using V = typename Lanes<VL>::V;
  using VU = typename Lanes<VL>::VU;
  constexpr int64_t kStep = VL * NV;
  V zero, start, qnan;
  for (int l = 0; l < VL; ++l) zero[l] = zero_f, start[l] = init, qnan[l] = fill[0];
  int64_t c = c0;
  for (; c + kStep <= c1; c += kStep) {
    V acc[NV];
    for (int j = 0; j < NV; ++j) acc[j] = start;
    if constexpr (Order == MinMaxOrder::kReduceLoop) {
      for (int64_t p = 0; p < width; ++p) {
        // LLVM folds max/min(acc, fill's NaN constant) to the NaN: it replaces any acc
        if (rows[p] == fill) {
          for (int j = 0; j < NV; ++j) acc[j] = qnan;
          continue;
        }
        const float* r = rows[p] + c;
        for (int j = 0; j < NV; ++j) acc[j] = Loop<VL, Kind>(acc[j], Load<VL>(r + j * VL, zero));
      }
    } else {
      for (int64_t t0 = 0; t0 < width; t0 += tile) {
        const int64_t t1 = std::min(width, t0 + tile);
        for (int64_t g = t0; g < t1; g += 4) {
          const float* r0 = rows[g] + c;
          V grp[NV];
          for (int j = 0; j < NV; ++j) grp[j] = Load<VL>(r0 + j * VL, zero);
          for (int64_t i = 1; i < 4; ++i) {
            // a tile's short last group repeats its first row
            const float* r = g + i < t1 ? rows[g + i] + c : r0;
            for (int j = 0; j < NV; ++j) grp[j] = Ynn<VL, Kind>(grp[j], Load<VL>(r + j * VL, zero));
          }
          for (int j = 0; j < NV; ++j) acc[j] = Ynn<VL, Kind>(grp[j], acc[j]);
        }
      }
    }
    for (int j = 0; j < NV; ++j) *reinterpret_cast<VU*>(out + c + j * VL) = acc[j];
  }
  return c;
}

// One bag's D columns: chunks of NV vectors of VL floats, then single vectors, then floats.
template <int VL, int NV, int Kind, MinMaxOrder Order>
__attribute__((always_inline)) inline void Bag(const float* const* rows, const float* fill,
                                               int64_t width, int64_t tile, int64_t d,
                                               float init, float zero, float* out) {
  int64_t c = Columns<VL, NV, Kind, Order>(rows, fill, width, tile, 0, d, init, zero, out);
  c = Columns<VL, 1, Kind, Order>(rows, fill, width, tile, c, d, init, zero, out);
  if constexpr (VL > 8) c = Columns<8, 1, Kind, Order>(rows, fill, width, tile, c, d, init, zero, out);
  Columns<1, 1, Kind, Order>(rows, fill, width, tile, c, d, init, zero, out);
}

template <int Kind, MinMaxOrder Order>
void BagsBaseline(const float* const* rows, const float* fill, int64_t width, int64_t tile,
                  int64_t d, float init, float zero, float* out) {
  Bag<8, 4, Kind, Order>(rows, fill, width, tile, d, init, zero, out);
}

#if defined(__x86_64__)
template <int Kind, MinMaxOrder Order>
__attribute__((target("avx2"))) void BagsAvx2(const float* const* rows, const float* fill,
                                              int64_t width, int64_t tile, int64_t d,
                                              float init, float zero, float* out) {
  Bag<8, 4, Kind, Order>(rows, fill, width, tile, d, init, zero, out);
}

template <int Kind, MinMaxOrder Order>
__attribute__((target("avx512f"))) void BagsAvx512(const float* const* rows, const float* fill,
                                                   int64_t width, int64_t tile, int64_t d,
                                                   float init, float zero, float* out) {
  Bag<16, 8, Kind, Order>(rows, fill, width, tile, d, init, zero, out);
}
#endif

template <int Kind, MinMaxOrder Order>
void Part(const float* table, const float* nan_row, const Plan& plan, int64_t b0, int64_t b1,
          int64_t width, int64_t d, float init, float zero, float* out) {
  constexpr int64_t kAhead = 16;  // lookups whose rows are prefetched ahead
  const int64_t tile = d > 0 ? std::max<int64_t>(1, kYnnTileValues / d) : 1;
  std::vector<const float*> rows(static_cast<size_t>(width));
  const int level = IsaLevel();
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
    if (level >= 2) {
      BagsAvx512<Kind, Order>(rows.data(), nan_row, width, tile, d, init, zero, out + b * d);
      continue;
    }
    if (level >= 1) {
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
