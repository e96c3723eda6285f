// ember.sparse_rowwise_adagrad: a lookup's gradient fused with rowwise Adagrad (FBGEMM's
// EXACT_ROWWISE_ADAGRAD, written as JAX users write it), the touched rows updated in place:
//   table[V,D], accum[V], indices[L], updates[L,D], lr[], eps[]    -> (table, accum)
//   (the gathered form as in sparse_optimizer.cc: updates = source[S,D] + source_rows [, mask])
//   m = sum(g * g over D) / D;  a = a + m;  t = t - (lr * g) / (sqrt(a) + eps)
// computed as XLA:CPU computes it: t = fma(-(lr * g), 1 / (sqrt(a) + eps), t), or, when lr is
// a constant of the module (attribute lr_folded), t = fma(-g, (1 / (sqrt(a) + eps)) * lr, t)
// with g the row's summed gradient (grad_common.h: XLA's scatter order) and the sum of squares
// in the order XLA:CPU reduces a row of g * g (RowSumSquares below). A row without gradient
// (g = +0) keeps its bits when lr is finite with its sign bit clear and the row's accumulator
// is a non-NaN value with its sign bit clear whose 1 / (sqrt + eps) is positive or +0 and
// finite, and (under the caller's denormal flushing, XLA:CPU's DAZ/FTZ: sparse_update.h,
// ForRows) neither the row nor its accumulator holds a denormal; otherwise the kernel applies
// the update with g = 0 to it, as XLA does. f32 only.
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "handler.h"
#include "sparse_update.h"

namespace ember {
namespace {

// sum(g[j] * g[j]) in the order XLA:CPU's YNNPACK fusion reduces a row of g * g along D
// (measured, jax/jaxlib 0.10.2, AVX-512 and AVX2 CPUs; native/row_mean_order.py says for which
// shapes it is XLA's, tests/native/test_row_mean_order.py holds it to XLA): each square
// rounded; 16 lanes, lane l of block b summing the squares 64 b + l, + 16, + 32, + 48 from
// zero; the blocks' lanes added in order; then the lanes halved: l + (l + 8), then + 4, + 2, + 1. D must be a multiple of 16.
__attribute__((target("avx2"))) float BlockedSumSquares(const float* g, int64_t d) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  for (int64_t b = 0; b < d; b += 64) {
    __m256 blo = _mm256_setzero_ps(), bhi = _mm256_setzero_ps();
    for (int64_t j = b; j < b + 64 && j < d; j += 16) {
      const __m256 x = _mm256_loadu_ps(g + j), y = _mm256_loadu_ps(g + j + 8);
      blo = _mm256_add_ps(blo, _mm256_mul_ps(x, x));
      bhi = _mm256_add_ps(bhi, _mm256_mul_ps(y, y));
    }
    lo = _mm256_add_ps(lo, blo);
    hi = _mm256_add_ps(hi, bhi);
  }
  const __m256 s8 = _mm256_add_ps(lo, hi);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
  return _mm_cvtss_f32(s1);
}

// The orders of sum(g * g) over a row that the rewrite reproduces (native/row_mean_order.py
// says which is XLA:CPU's for a shape): kBlocked16 (YNNPACK's, above) and kSequential
// (0 + g0 * g0 + g1 * g1 + ..., each square rounded: XLA's own loop for D = 1).
enum class SumOrder { kBlocked16, kSequential };

bool ParseSumOrder(std::string_view s, SumOrder* out) {
  if (s == "blocked16") return *out = SumOrder::kBlocked16, true;
  if (s == "sequential") return *out = SumOrder::kSequential, true;
  return false;
}

float RowSumSquares(const float* g, int64_t d, SumOrder order) {
  if (order == SumOrder::kBlocked16) return BlockedSumSquares(g, d);
  float s = 0.0f;
  for (int64_t j = 0; j < d; ++j) s = s + g[j] * g[j];
  return s;
}

// XLA:CPU's algebraic simplifier turns the divide by the row-broadcast denominator into a
// multiply by its reciprocal, and its LLVM contracts t - (lr * g) * r into one FMA.
// With a constant lr XLA also reassociates (g * lr) * r into g * (r * lr) (`folded`).
__attribute__((target("avx2,fma"))) void RowUpdate(const RowArray& t, const RowArray& a,
                                                   int64_t r, const float* g, float lr,
                                                   float eps, bool folded, SumOrder order,
                                                   int64_t d) {
  // jnp.mean's divide by D: XLA makes a power-of-two D a multiply by 1 / D and contracts it
  // with the add into one FMA
  const float s = RowSumSquares(g, d, order);
  const bool pow2 = (d & (d - 1)) == 0;
  const float acc = pow2 ? __builtin_fmaf(s, 1.0f / static_cast<float>(d), a.src[r])
                         : a.src[r] + s / static_cast<float>(d);
  const float inv = 1.0f / (std::sqrt(acc) + eps);
  const float* ts = t.src + r * d;
  float* td = t.dst + r * d;
  int64_t j = 0;
  if (folded) {
    const float k = inv * lr;
    const __m256 vk = _mm256_set1_ps(k);
    for (; j + 8 <= d; j += 8)
      _mm256_storeu_ps(td + j,
                       _mm256_fnmadd_ps(_mm256_loadu_ps(g + j), vk, _mm256_loadu_ps(ts + j)));
    for (; j < d; ++j) td[j] = __builtin_fmaf(-g[j], k, ts[j]);
  } else {
    const __m256 vl = _mm256_set1_ps(lr), vi = _mm256_set1_ps(inv);
    for (; j + 8 <= d; j += 8)
      _mm256_storeu_ps(td + j, _mm256_fnmadd_ps(_mm256_mul_ps(vl, _mm256_loadu_ps(g + j)), vi,
                                                _mm256_loadu_ps(ts + j)));
    for (; j < d; ++j) td[j] = __builtin_fmaf(-(lr * g[j]), inv, ts[j]);
  }
  a.dst[r] = acc;
}

// Does a row without gradient keep its accumulator a and its table row under the update
// (a + 0 == a bit for bit; fma(-0, r, t) == t needs the row's factor r finite, r being
// 1 / (sqrt(a) + eps), times lr when folded; lr itself finite with its sign bit clear)?
bool RowKept(float a, float eps, float lr, bool folded) {
  const float den = std::sqrt(a) + eps;
  const float r = 1.0f / den;
  return !std::isnan(a) && !std::signbit(a) && den > 0.0f && std::isfinite(r) &&
         (!folded || std::isfinite(r * lr));
}

// The first row in [q, end) that RowKept says the update changes, or end: 8 accumulators at a
// time through the same IEEE operations (sqrt, add, divide, multiply), then one by one.
__attribute__((target("avx2"))) int64_t FirstChanged(const float* acc, int64_t q, int64_t end,
                                                     float eps, float lr, bool folded) {
  const __m256 ve = _mm256_set1_ps(eps), vl = _mm256_set1_ps(lr), one = _mm256_set1_ps(1.0f);
  const __m256 inf = _mm256_set1_ps(INFINITY), zero = _mm256_setzero_ps();
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (; q + 8 <= end; q += 8) {
    const __m256 x = _mm256_loadu_ps(acc + q);
    const __m256 den = _mm256_add_ps(_mm256_sqrt_ps(x), ve);
    const __m256 r = _mm256_div_ps(one, den);
    __m256 kept = _mm256_and_ps(_mm256_cmp_ps(den, zero, _CMP_GT_OQ),
                                _mm256_cmp_ps(_mm256_and_ps(r, abs_mask), inf, _CMP_LT_OQ));
    if (folded)
      kept = _mm256_and_ps(kept, _mm256_cmp_ps(_mm256_and_ps(_mm256_mul_ps(r, vl), abs_mask), inf,
                                               _CMP_LT_OQ));
    // not NaN (den > 0 fails for NaN) and sign bit clear
    const int ok = _mm256_movemask_ps(kept) & ~_mm256_movemask_ps(x) & 0xff;
    if (ok != 0xff) return q + __builtin_ctz(~ok & 0xff);
  }
  for (; q < end; ++q)
    if (!RowKept(acc[q], eps, lr, folded)) return q;
  return end;
}

// Does RowKept hold for exactly the accumulators whose sign bit is clear and that are not NaN?
// Yes when eps is a positive normal float and 1 / eps (times lr when folded; lr is then
// finite and >= 0) is finite: for such an a, sqrt(a) + eps >= eps > 0 and, rounding being
// monotonic, 1 / (sqrt(a) + eps) <= 1 / eps (and its product with lr no larger than theirs),
// so every factor is finite (a = +inf gives +0). Denormals-are-zero cannot touch a normal eps.
bool KeptBySignAlone(float eps, float lr, bool folded) {
  if (!(eps >= FLT_MIN) || !std::isfinite(eps)) return false;
  const float r = 1.0f / eps;
  return std::isfinite(r) && (!folded || std::isfinite(r * lr));
}

// The first accumulator in [q, end) whose sign bit is set or that is NaN (its bits above
// +inf's as an unsigned integer), or end: FirstChanged where KeptBySignAlone holds, reading
// the accumulators at memory speed instead of a square root and a divide per row.
__attribute__((target("avx2"))) int64_t FirstSignedOrNaN(const float* acc, int64_t q,
                                                         int64_t end) {
  const __m256i inf = _mm256_set1_epi32(0x7f800000), zero = _mm256_setzero_si256();
  for (; q + 8 <= end; q += 8) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + q));
    const __m256i bad = _mm256_or_si256(_mm256_cmpgt_epi32(x, inf), _mm256_cmpgt_epi32(zero, x));
    const int m = _mm256_movemask_ps(_mm256_castsi256_ps(bad));
    if (m != 0) return q + __builtin_ctz(m);
  }
  for (; q < end; ++q) {
    uint32_t bits;
    std::memcpy(&bits, acc + q, sizeof bits);
    if (bits > 0x7f800000u) return q;
  }
  return end;
}

ffi::Error SparseRowwiseAdagradImpl(ffi::AnyBuffer table, ffi::AnyBuffer accum,
                                    ffi::AnyBuffer indices, ffi::AnyBuffer updates,
                                    ffi::AnyBuffer lr_buf, ffi::AnyBuffer eps_buf,
                                    ffi::RemainingArgs rest,
                                    ffi::Result<ffi::AnyBuffer> out_table,
                                    ffi::Result<ffi::AnyBuffer> out_accum,
                                    ffi::ThreadPool xla_pool, bool folded,
                                    std::string_view sum_order) {
  XlaPoolScope pool_scope(&xla_pool);
  const char* kind = "sparse_rowwise_adagrad";
  return Guarded(kind, [&]() -> ffi::Error {
    if (auto e = CheckTableLike(kind, table, *out_table, table); e.failure()) return e;
    if (auto e = CheckTableLike(kind, accum, *out_accum, table, true); e.failure()) return e;
    const int64_t v = table.dimensions()[0], d = table.dimensions()[1];
    UpdateRows rows;
    if (auto e = GetUpdateRows(kind, indices, updates, rest, d, &rows); e.failure()) return e;
    if (updates.element_type() != ffi::DataType::F32)
      return ffi::Error::InvalidArgument("ember.sparse_rowwise_adagrad: updates must be f32");
    float lr, eps;
    if (auto e = ScalarF32(kind, lr_buf, &lr); e.failure()) return e;
    if (auto e = ScalarF32(kind, eps_buf, &eps); e.failure()) return e;
    if (!Fma())
      return ffi::Error::Internal("ember.sparse_rowwise_adagrad: needs a CPU with AVX2 and FMA");
    SumOrder order;
    if (!ParseSumOrder(sum_order, &order))
      return ffi::Error::InvalidArgument("ember.sparse_rowwise_adagrad: unknown sum_order " +
                                         std::string(sum_order));
    if (order == SumOrder::kBlocked16 && d % 16 != 0)
      return ffi::Error::InvalidArgument(
          "ember.sparse_rowwise_adagrad: D must be a multiple of 16 for sum_order blocked16, "
          "got " + std::to_string(d));
    RowGroups& g = ScratchGroups();
    BuildRowGroups(indices.untyped_data(), indices.element_type() == ffi::DataType::S32,
                   indices.dimensions()[0], v, &g);
    const RowArray t = Pair(table, *out_table, d), a = Pair(accum, *out_accum, 1);
    const bool lr_kept = std::isfinite(lr) && !std::signbit(lr);
    const bool by_sign = lr_kept && KeptBySignAlone(eps, lr, folded);
    ForRows(g, rows, v, d, lr_kept ? Untouched::kCheck : Untouched::kDense, {t, a},
            [&](int64_t r) {
              PrefetchRow(t.dst + r * d, d);
              __builtin_prefetch(a.dst + r, 1);
            },
            [&](int64_t r, const float* grad) {
              RowUpdate(t, a, r, grad, lr, eps, folded, order, d);
            },
            [&](int64_t q, int64_t end) {
              return by_sign ? FirstSignedOrNaN(a.src, q, end)
                             : FirstChanged(a.src, q, end, eps, lr, folded);
            });
    return ffi::Error::Success();
  });
}

}  // namespace
}  // namespace ember

// The kernel's mean(g * g) over each of `rows` rows of width d in the order `order` (a
// SumOrder; blocked16 needs AVX2 and a multiple of 16, else NaN), for the tests that hold
// native/row_mean_order.py's rule against XLA:CPU (ctypes).
EMBER_EXPORT void EmberRowMeanSquares(const float* g, int64_t rows, int64_t d, int order,
                                      float* out) {
  const auto o = static_cast<ember::SumOrder>(order);
  const bool ok = o != ember::SumOrder::kBlocked16 || (ember::HaveAvx2() && d % 16 == 0);
  for (int64_t r = 0; r < rows; ++r)
    out[r] = ok ? ember::RowSumSquares(g + r * d, d, o) / static_cast<float>(d) : std::nanf("");
}

EMBER_HANDLER(EmberSparseRowwiseAdagrad, ember::SparseRowwiseAdagradImpl,
              EMBER_ARRAYS_3.Arg<xla::ffi::AnyBuffer>()
                  .Arg<xla::ffi::AnyBuffer>()
                  .Arg<xla::ffi::AnyBuffer>()
                  .RemainingArgs()
                  .Ret<xla::ffi::AnyBuffer>()
                  .Ret<xla::ffi::AnyBuffer>()
                  .Ctx<xla::ffi::ThreadPool>()
                  .Attr<bool>("lr_folded")
                  .Attr<std::string_view>("sum_order"));
