// Padded sum/mean bags in YNNPACK's blocked order (blocked_sum.h): blocks of 4 rows, groups of
// 4 blocks, groups of 16 groups, then in order; every partial sum starts from zero. Weighted f16
// bags add their products, each rounded to f16 first, in the same order; so do f32 rows scaled
// by one number (XLA:CPU's multiply by a broadcast scalar, then YNNPACK's reduce).
#include "blocked_sum.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "common.h"
#include "padded_parts.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ember {
namespace {

template <typename T>
void Bags(const T* __restrict table, const T* __restrict weights, const Plan& plan, int64_t b0,
          int64_t b1, int64_t width, int64_t d, bool mean, float* __restrict out) {
  std::vector<float> acc(static_cast<size_t>(4 * d));
  float* blk = acc.data();
  float* g16 = blk + d;
  float* g256 = g16 + d;
  float* top = g256 + d;
  const float nan = std::nanf("");
  const float scale = 1.0f / static_cast<float>(width);
  for (int64_t b = b0; b < b1; ++b) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    const int64_t* src = plan.src.data() + b * width;
    for (int64_t p = 0; p < width; ++p) {
      const int64_t row = src[p];
      if (row == kMaskedRow) {
        // adds +0 to a sum started at +0: nothing
      } else if (row < 0) {
        for (int64_t c = 0; c < d; ++c) blk[c] = blk[c] + nan;
      } else if (weights != nullptr) {
        // XLA:CPU's loop fusion materializes the f16 products (YNNPACK has no f16 multiply),
        // converted to f32 for YNNPACK's reduce; f32 products are rounded to f32 (no FMA)
        const T* r = table + row * d;
        const float w = Elem<T>::Load(weights[b * width + p]);
        for (int64_t c = 0; c < d; ++c)
          blk[c] = blk[c] + Elem<T>::Round(Elem<T>::Load(r[c]) * w);
      } else {
        const T* r = table + row * d;
        for (int64_t c = 0; c < d; ++c) blk[c] = blk[c] + Elem<T>::Load(r[c]);
      }
      const bool last = p + 1 == width;
      if ((p & 3) == 3 || last) {
        for (int64_t c = 0; c < d; ++c) g16[c] = g16[c] + blk[c], blk[c] = 0.0f;
        if (((p >> 2) & 3) == 3 || last) {
          for (int64_t c = 0; c < d; ++c) g256[c] = g256[c] + g16[c], g16[c] = 0.0f;
          if (((p >> 4) & 15) == 15 || last) {
            for (int64_t c = 0; c < d; ++c) top[c] = top[c] + g256[c], g256[c] = 0.0f;
          }
        }
      }
    }
    float* o = out + b * d;
    if (mean) {
      for (int64_t c = 0; c < d; ++c) o[c] = top[c] * scale;
    } else {
      for (int64_t c = 0; c < d; ++c) o[c] = top[c];
    }
  }
}

#if defined(__x86_64__)
// The same adds in the same order, lane-wise in AVX2 registers (IEEE adds, no FMA: the same
// bits as Bags): per bag, columns in chunks of NV x 8 floats whose four levels of partial sums
// (block, 16 rows, 256 rows, total) stay in registers, and the rows of the lookups kAhead
// entries ahead (across bags, within the part) prefetched on the first chunk. f32 tables, and
// unweighted bf16 (8 halves widened and shifted: exact) and f16 ones (F16C's vcvtph2ps: exact,
// every f16 a normal or zero f32; a signalling NaN comes out quiet, as the first add makes it).
typedef float V8 __attribute__((vector_size(32)));
typedef float V8U __attribute__((vector_size(32), aligned(4)));
typedef uint16_t H8U __attribute__((vector_size(16), aligned(2)));
typedef uint32_t U8 __attribute__((vector_size(32)));
typedef uint32_t U8UA __attribute__((vector_size(32), aligned(4)));
constexpr int64_t kAhead = 16;

template <typename T>
__attribute__((target("avx2,f16c"), always_inline)) inline V8 Load8(const T* r) {
  if constexpr (std::is_same<T, float>::value) {
    return *reinterpret_cast<const V8U*>(r);
  } else if constexpr (std::is_same<T, bf16>::value) {
    const U8 u = __builtin_convertvector(*reinterpret_cast<const H8U*>(r), U8) << 16;
    return (V8)u;  // a vector cast: the same 256 bits
  } else if constexpr (std::is_same<T, f32_as_bf16>::value) {
    // FloatToBf16Bits on 8 lanes: round to nearest even, a NaN quieted (sign and top kept)
    const U8 u = *reinterpret_cast<const U8UA*>(r);
    const U8 rounded = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    const U8 quiet = (u | 0x00400000u) & 0xffff0000u;
    const U8 nan = (U8)((u & 0x7fffffffu) > 0x7f800000u);  // all ones where NaN
    return (V8)((quiet & nan) | (rounded & ~nan));
  } else {
    static_assert(std::is_same<T, f16>::value, "f32, bf16, f32-as-bf16 or f16 rows");
    return (V8)_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r)));
  }
}

// Levels: how many of the four partial sums a bag needs: 2 for bags of at most 16 rows, 3 up to
// 256 rows, else 4. Every partial sum is an add's result that started from +0, so never -0
// (a NaN is already quiet, and under XLA:CPU's flush-to-zero never a denormal): adding it to a
// +0 level above is the identity, so a bag of at most 16 rows is its 16-row sum and one of at
// most 256 rows its 256-row sum. Fewer levels leave registers for wider chunks.
template <typename T, int NV, bool kWeighted, int Levels>
__attribute__((target("avx2,f16c"))) void BagsAvx2(const T* __restrict table,
                                                   const T* __restrict weights,
                                                   const T* nan_row, const Plan& plan,
                                                   int64_t b0, int64_t b1, int64_t width,
                                                   int64_t d, bool mean, float* __restrict out) {
  static_assert(std::is_same<T, float>::value || !kWeighted, "weighted: f32 rows only");
  static_assert(Levels >= 2 && Levels <= 4, "block and 16-row sums at least");
  const float scale = 1.0f / static_cast<float>(width);
  const int64_t* all = plan.src.data();
  const int64_t k_end = b1 * width;
  const V8 zero = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t* src = all + b * width;
    for (int64_t c0 = 0; c0 < d; c0 += 8 * NV) {
      V8 blk[NV], g16[NV], g256[NV], top[NV];
      for (int i = 0; i < NV; ++i) blk[i] = g16[i] = g256[i] = top[i] = zero;
      for (int64_t p = 0; p < width; ++p) {
        if (c0 == 0 && b * width + p + kAhead < k_end) {
          const int64_t ahead = all[b * width + p + kAhead];
          if (ahead >= 0)
            PrefetchLines<EMBER_PREFETCH_LOCALITY>(table + ahead * d,
                                                   d * static_cast<int64_t>(sizeof(T)));
        }
        const int64_t row = src[p];
        const T* r = RowPointer(table, nan_row, row, d) + c0;
        if constexpr (kWeighted) {  // the product rounded to f32, then added (no FMA)
          const float w = weights[b * width + p];
          const V8 wv = {w, w, w, w, w, w, w, w};
          for (int i = 0; i < NV; ++i) blk[i] = blk[i] + Load8(r + 8 * i) * wv;
        } else {
          for (int i = 0; i < NV; ++i) blk[i] = blk[i] + Load8(r + 8 * i);
        }
        const bool last = p + 1 == width;
        if ((p & 3) == 3 || last) {
          for (int i = 0; i < NV; ++i) g16[i] = g16[i] + blk[i], blk[i] = zero;
          if (Levels >= 3 && (((p >> 2) & 3) == 3 || last)) {
            for (int i = 0; i < NV; ++i) g256[i] = g256[i] + g16[i], g16[i] = zero;
            if (Levels == 4 && (((p >> 4) & 15) == 15 || last))
              for (int i = 0; i < NV; ++i) top[i] = top[i] + g256[i], g256[i] = zero;
          }
        }
      }
      float* o = out + b * d + c0;
      const V8* sum = Levels == 2 ? g16 : Levels == 3 ? g256 : top;
      for (int i = 0; i < NV; ++i)
        *reinterpret_cast<V8U*>(o + 8 * i) = mean ? sum[i] * scale : sum[i];
    }
  }
}

// The chunk loop for D a multiple of 8 * NV, with the levels the bags' length needs, at most
// MaxLevels (the caller's bags are no longer than that allows).
template <typename T, int NV, bool kWeighted, int MaxLevels = 4>
void ChunksAvx2(const T* table, const T* w, const T* nan_row, const Plan& plan, int64_t b0,
                int64_t b1, int64_t width, int64_t d, bool mean, float* out) {
  if (width <= 16)
    BagsAvx2<T, NV, kWeighted, 2>(table, w, nan_row, plan, b0, b1, width, d, mean, out);
  else if constexpr (MaxLevels == 3)
    BagsAvx2<T, NV, kWeighted, 3>(table, w, nan_row, plan, b0, b1, width, d, mean, out);
  else if (width <= 256)
    BagsAvx2<T, NV, kWeighted, 3>(table, w, nan_row, plan, b0, b1, width, d, mean, out);
  else
    BagsAvx2<T, NV, kWeighted, 4>(table, w, nan_row, plan, b0, b1, width, d, mean, out);
}

// g16[i] += the block sum of vector i of rows r[0..m) (from +0, in order; weighted: each
// product rounded to f32 first, no FMA); m = kRows, or n when kRows is 0.
template <typename T, bool kWeighted, int NV, int64_t kRows>
__attribute__((target("avx2,f16c"), always_inline)) inline void AddBlock(const T* const* r,
                                                                         const float* w,
                                                                         int64_t n, V8* g16) {
  const V8 zero = {0, 0, 0, 0, 0, 0, 0, 0};
  const int64_t m = kRows > 0 ? kRows : n;
  for (int i = 0; i < NV; ++i) {
    V8 blk = zero;
    for (int64_t j = 0; j < m; ++j) {
      if constexpr (kWeighted) {
        const V8 wv = {w[j], w[j], w[j], w[j], w[j], w[j], w[j], w[j]};
        blk = blk + Load8(r[j] + 8 * i) * wv;
      } else {
        blk = blk + Load8(r[j] + 8 * i);
      }
    }
    g16[i] = g16[i] + blk;
  }
}

// The same adds in the same order for bags of more than 16 rows, the block and 16-row sums in
// registers: per bag, columns in chunks of NV x 8 floats (a 64-float row in one pass; wider
// rows in several, the later passes re-reading the bag's rows from L1/L2); per 4-row block
// and vector of the chunk the block sum (from +0, the block's rows in order) is added to that
// vector's 16-row sum. The 256-row and total sums live in `acc` (2 D floats, L1) and are
// flushed up at Bags' rows. The first pass prefetches the rows of the lookups kAhead entries
// ahead (across bags, within the part) whole.
template <typename T, bool kWeighted, int NV>
__attribute__((target("avx2,f16c"))) void BlocksAvx2(const T* __restrict table,
                                                     const T* __restrict weights,
                                                     const T* nan_row, const Plan& plan,
                                                     int64_t b0, int64_t b1, int64_t width,
                                                     int64_t d, bool mean, float* __restrict out,
                                                     float* __restrict acc) {
  static_assert(std::is_same<T, float>::value || !kWeighted, "weighted: f32 rows only");
  const float scale = 1.0f / static_cast<float>(width);
  const int64_t* all = plan.src.data();
  const int64_t k_end = b1 * width;
  const int64_t row_bytes = d * static_cast<int64_t>(sizeof(T));
  const V8 zero = {0, 0, 0, 0, 0, 0, 0, 0};
  float* __restrict g256 = acc;
  float* __restrict top = acc + d;
  auto prefetch = [&](int64_t k) {
    if (k < k_end && all[k] >= 0)
      PrefetchLines<EMBER_PREFETCH_LOCALITY>(table + all[k] * d, row_bytes);
  };
  for (int64_t k = b0 * width; k < b0 * width + kAhead; ++k) prefetch(k);
  // Bags of up to 256 rows are their 256-row sum (see BagsAvx2's Levels); longer ones keep
  // `top`.
  const bool one_256 = width <= 256;
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t* src = all + b * width;
    for (int64_t c0 = 0; c0 < d; c0 += 8 * NV) {
      V8 g16[NV];
      for (int i = 0; i < NV; ++i) g16[i] = zero;
      for (int64_t c = c0; c < c0 + 8 * NV; ++c) g256[c] = top[c] = 0.0f;
      for (int64_t p0 = 0, block = 0; p0 < width; p0 += 4, ++block) {
        const int64_t n = std::min<int64_t>(4, width - p0);
        const T* r[4] = {nullptr, nullptr, nullptr, nullptr};
        float w[4] = {1, 1, 1, 1};
        for (int64_t j = 0; j < n; ++j) {
          if (c0 == 0) prefetch(b * width + p0 + j + kAhead);
          r[j] = RowPointer(table, nan_row, src[p0 + j], d) + c0;
          if constexpr (kWeighted) w[j] = weights[b * width + p0 + j];
        }
        if (n == 4) AddBlock<T, kWeighted, NV, 4>(r, w, n, g16);
        else AddBlock<T, kWeighted, NV, 0>(r, w, n, g16);
        const bool last = p0 + n == width;
        if ((block & 3) == 3 || last) {
          for (int i = 0; i < NV; ++i) {
            V8U* g = reinterpret_cast<V8U*>(g256 + c0 + 8 * i);
            *g = *g + g16[i];
            g16[i] = zero;
          }
          if (!one_256 && (((block >> 2) & 15) == 15 || last))
            for (int64_t c = c0; c < c0 + 8 * NV; ++c) top[c] = top[c] + g256[c], g256[c] = 0.0f;
        }
      }
      float* o = out + b * d + c0;
      const float* sum = one_256 ? g256 + c0 : top + c0;
      const V8 sv = {scale, scale, scale, scale, scale, scale, scale, scale};
      for (int i = 0; i < NV; ++i) {
        const V8 v = *reinterpret_cast<const V8U*>(sum + 8 * i);
        *reinterpret_cast<V8U*>(o + 8 * i) = mean ? v * sv : v;
      }
    }
  }
}

bool HasAvx2() {
  static const bool yes =
      __builtin_cpu_supports("avx2") != 0 && __builtin_cpu_supports("f16c") != 0;
  return yes;
}
#endif

// Bags [b0, b1) of tables whose D is a multiple of 8 -- f32 (unweighted, or rows times their
// weight), bf16 and f16 (unweighted) --, by the loop measured the fastest there
// (docs/BENCHMARKS.md): D a multiple of 64: bags of up to 16 rows in chunks of 8 vectors,
// longer ones BlocksAvx2; else chunks of 4 vectors (D a multiple of 32, up to 256 rows: three
// levels, 12 registers), 2 or 1. Other tables: Bags.
template <typename T>
void Part(const T* table, const T* w, const T* nan_row, const Plan& plan, int64_t b0,
          int64_t b1, int64_t width, int64_t d, bool mean, float* out) {
#if defined(__x86_64__)
  if (d > 0 && d % 8 == 0 && HasAvx2() && (w == nullptr || std::is_same<T, float>::value)) {
    auto run = [&](auto weighted) {
      constexpr bool kW = decltype(weighted)::value;
      if constexpr (kW && !std::is_same<T, float>::value) {
        return;  // weighted bf16 / f16 bags take Bags (excluded above)
      } else if (d % 64 == 0 && width <= 16) {
        BagsAvx2<T, 8, kW, 2>(table, w, nan_row, plan, b0, b1, width, d, mean, out);
      } else if (d % 64 == 0) {
        std::vector<float> acc(static_cast<size_t>(2 * d));
        BlocksAvx2<T, kW, 8>(table, w, nan_row, plan, b0, b1, width, d, mean, out, acc.data());
      } else if (d % 32 == 0 && width <= 256) {
        ChunksAvx2<T, 4, kW, 3>(table, w, nan_row, plan, b0, b1, width, d, mean, out);
      } else if (d % 16 == 0) {
        ChunksAvx2<T, 2, kW>(table, w, nan_row, plan, b0, b1, width, d, mean, out);
      } else {
        ChunksAvx2<T, 1, kW>(table, w, nan_row, plan, b0, b1, width, d, mean, out);
      }
    };
    if (w == nullptr) run(std::false_type{});
    else run(std::true_type{});
    return;
  }
#endif
  Bags<T>(table, w, plan, b0, b1, width, d, mean, out);
}

template <typename T>
void Run(const ffi::AnyBuffer& table, const void* weights, const Plan& plan, int64_t bags,
         int64_t width, const Options& opt, ffi::AnyBuffer& out) {
  const T* t = static_cast<const T*>(table.untyped_data());
  const T* w = static_cast<const T*>(weights);
  const int64_t d = table.dimensions()[1];
  float* o = static_cast<float*>(out.untyped_data());
  const bool mean = opt.combiner == Combiner::kMean;
  std::vector<T> nan_row(static_cast<size_t>(2 * d), Elem<T>::Store(0.0f));  // D NaNs, D zeros
  std::fill(nan_row.begin(), nan_row.begin() + d, Elem<T>::Store(std::nanf("")));
  RunBagParts(bags, width, d, [&](int64_t b0, int64_t b1) {
    Part<T>(t, w, nan_row.data(), plan, b0, b1, width, d, mean, o);
  });
}

}  // namespace

ffi::Error RunBlockedPaddedSum(const ffi::AnyBuffer& table, const void* weights,
                               ffi::DataType weights_type, const Plan& plan, int64_t bags,
                               int64_t width, const Options& opt, ffi::AnyBuffer& out) {
  if (out.element_type() != ffi::DataType::F32)
    return ffi::Error::InvalidArgument("ember.padded_bag: the blocked order needs an f32 result");
  if ((opt.combiner != Combiner::kSum && opt.combiner != Combiner::kMean) || opt.init != 0.0)
    return ffi::Error::InvalidArgument(
        "ember.padded_bag: the blocked order is for sum/mean bags starting at 0");
  const bool same_type = table.element_type() == weights_type &&
                         (weights_type == ffi::DataType::F16 || weights_type == ffi::DataType::F32);
  if (opt.weighted && (!same_type || opt.combiner != Combiner::kSum))
    return ffi::Error::InvalidArgument(
        "ember.padded_bag: the blocked order of weighted bags is for f16 or f32 tables with "
        "weights of their type (products rounded to it), combiner sum");
  if (!opt.weighted) weights = nullptr;
  return WithTableType(table.element_type(), opt.rows_bf16, [&](auto tag) {
    Run<decltype(tag)>(table, weights, plan, bags, width, opt, out);
  });
}

}  // namespace ember
