// Fused sparse optimizers: the gradient of a row lookup summed per touched row exactly as
// ember.scatter_grad sums it, then the optimizer applied to those rows of the table (and of its
// slot variables) in place; the result buffers alias the table operands
// (output_to_operand_aliasing), so a donated table is never copied.
//
// (each also in the gathered form: updates replaced by source[S,D] with trailing
// source_rows[L] [, mask[L]] operands, see grad_common.h)
//   ember.sparse_sgd:     table[V,D], indices[L], updates[L,D], scale[]      -> table
//                         t = t + g * scale            (XLA contracts this to fma(g, scale, t))
//   ember.sparse_adagrad: table, accum, indices, updates, scale[], eps[]     -> (table, accum)
//                         a = g * g + a; u = (a > 0 ? rsqrt(a + eps) : 0) * g; t = t + u * scale
//                         (optax.adagrad; both multiply-adds contracted as XLA contracts them)
//   ember.sparse_adagrad_keras: the same operands and results, scale[] = lr
//                         a = g * g + a; t = t - (lr * g) * rsqrt(a + eps)
//                         (Keras 3's Adagrad: XLA's simplifier makes its x / sqrt(y) a
//                         multiply by rsqrt(y); both multiply-adds contracted as XLA does)
//
// Rows without gradient are left alone only when the dense update provably leaves them
// unchanged (scale finite with its sign bit set, eps >= 0; for Adagrad also no -0 in the row's
// accumulator, which g * g + a turns into +0; for Keras' Adagrad lr finite with its sign bit
// clear and, per row, no -0 in the accumulator and a + eps > 0 for each element, as
// (lr * 0) * rsqrt(a + eps) is then +0 and t - (+0) is t); otherwise the kernel applies the
// update with g = 0 to that untouched row (or to every one) as well, which is what XLA
// computes. Under the caller's denormal flushing (XLA:CPU's DAZ/FTZ) a row holding a denormal
// in the table or a slot is one the dense update changes (to the zero of its sign), so it gets
// the update with g = 0 too: each step reads the untouched rows then (sparse_update.h:
// ForRows, FirstWithDenormal, at memory speed). f32 only.
// Results alias the operands or not (sparse_update.h: then written once, untouched rows copied).
#include <vector>

#include "handler.h"
#include "sparse_update.h"
#include "xla_rsqrt.h"

namespace ember {
namespace {

// dst = fma(g, s, src), 8 floats at a time (the same single rounding per element).
__attribute__((target("avx2,fma"))) void SgdRow(float* dst, const float* src, const float* g,
                                                float s, int64_t d) {
  int64_t j = 0;
  const __m256 vs = _mm256_set1_ps(s);
  for (; j + 8 <= d; j += 8)
    _mm256_storeu_ps(dst + j,
                     _mm256_fmadd_ps(_mm256_loadu_ps(g + j), vs, _mm256_loadu_ps(src + j)));
  for (; j < d; ++j) dst[j] = __builtin_fmaf(g[j], s, src[j]);
}

// One touched row of optax's Adagrad (Keras = false; s = -lr):
//   a = fma(g, g, a); t = fma((a > 0 ? rsqrt(a + eps) : 0) * g, s, t)
// or of Keras' (Keras = true; s = lr): a = fma(g, g, a); t = fma(-(lr * g), rsqrt(a + eps), t).
template <bool Keras>
__attribute__((target("avx2,fma"))) void AdagradRow(const RowArray& t, const RowArray& a,
                                                    int64_t r, const float* g, float s,
                                                    float eps, int64_t d) {
  const float* ts = t.src + r * d;
  const float* as = a.src + r * d;
  float* td = t.dst + r * d;
  float* ad = a.dst + r * d;
  int64_t j = 0;
  const __m256 vs = _mm256_set1_ps(s), ve = _mm256_set1_ps(eps), zero = _mm256_setzero_ps();
  for (; j + 8 <= d; j += 8) {
    const __m256 gj = _mm256_loadu_ps(g + j);
    const __m256 acc = _mm256_fmadd_ps(gj, gj, _mm256_loadu_ps(as + j));
    const __m256 rs = XlaRsqrt8(_mm256_add_ps(acc, ve));
    const __m256 tj = _mm256_loadu_ps(ts + j);
    if constexpr (Keras) {
      _mm256_storeu_ps(td + j, _mm256_fnmadd_ps(_mm256_mul_ps(vs, gj), rs, tj));
    } else {
      const __m256 scale = _mm256_blendv_ps(zero, rs, _mm256_cmp_ps(acc, zero, _CMP_GT_OQ));
      _mm256_storeu_ps(td + j, _mm256_fmadd_ps(_mm256_mul_ps(scale, gj), vs, tj));
    }
    _mm256_storeu_ps(ad + j, acc);
  }
  for (; j < d; ++j) {
    const float acc = __builtin_fmaf(g[j], g[j], as[j]);
    if constexpr (Keras) {
      td[j] = __builtin_fmaf(-(s * g[j]), XlaRsqrt(acc + eps), ts[j]);
    } else {
      const float scale = acc > 0.0f ? XlaRsqrt(acc + eps) : 0.0f;
      td[j] = __builtin_fmaf(scale * g[j], s, ts[j]);
    }
    ad[j] = acc;
  }
}

// The first row in [q, end) whose Keras Adagrad update with g = 0 changes it: an accumulator
// element that is -0 (fma(0, 0, -0) is +0) or with a + eps not > 0 (zero, negative or NaN:
// rsqrt gives inf or NaN, times +0 a NaN), or end.
__attribute__((target("avx2"))) int64_t FirstKerasChanged(const float* acc, float eps,
                                                          int64_t d, int64_t q, int64_t end) {
  const __m256i neg_zero = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  const __m256 ve = _mm256_set1_ps(eps), zero = _mm256_setzero_ps();
  for (int64_t r = q; r < end; ++r) {
    const float* row = acc + r * d;
    int64_t j = 0;
    for (; j + 8 <= d; j += 8) {
      const __m256 x = _mm256_loadu_ps(row + j);
      const __m256 nz = _mm256_castsi256_ps(
          _mm256_cmpeq_epi32(_mm256_castps_si256(x), neg_zero));
      const __m256 pos = _mm256_cmp_ps(_mm256_add_ps(x, ve), zero, _CMP_GT_OQ);
      if (_mm256_movemask_ps(_mm256_andnot_ps(nz, pos)) != 0xff) return r;
    }
    for (; j < d; ++j) {
      uint32_t bits;
      std::memcpy(&bits, row + j, sizeof bits);
      if (bits == 0x80000000u || !(row[j] + eps > 0.0f)) return r;
    }
  }
  return end;
}

// The first row in [q, end) of a [V, d] accumulator holding a -0 (bits 0x80000000), or end:
// the untouched rows Adagrad's g * g + a changes when g = 0 (to +0; a NaN stays NaN, and NaN
// payloads are not part of the equality rule). Read at memory speed.
__attribute__((target("avx2"))) int64_t FirstWithNegativeZero(const float* acc, int64_t d,
                                                              int64_t q, int64_t end) {
  const int64_t n = end * d;
  int64_t i = q * d;
  const __m256i neg_zero = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  for (; i + 32 <= n; i += 32) {  // 128 bytes a step, one branch: at memory speed
    const __m256i* p = reinterpret_cast<const __m256i*>(acc + i);
    const __m256i any = _mm256_or_si256(
        _mm256_or_si256(_mm256_cmpeq_epi32(_mm256_loadu_si256(p), neg_zero),
                        _mm256_cmpeq_epi32(_mm256_loadu_si256(p + 1), neg_zero)),
        _mm256_or_si256(_mm256_cmpeq_epi32(_mm256_loadu_si256(p + 2), neg_zero),
                        _mm256_cmpeq_epi32(_mm256_loadu_si256(p + 3), neg_zero)));
    if (!_mm256_testz_si256(any, any)) break;  // found in this block: located below
  }
  for (; i + 8 <= n; i += 8) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + i));
    const int m = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(x, neg_zero)));
    if (m != 0) return (i + __builtin_ctz(m)) / d;
  }
  for (; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, acc + i, sizeof bits);
    if (bits == 0x80000000u) return i / d;
  }
  return end;
}

ffi::Error SparseSgdImpl(ffi::AnyBuffer table, ffi::AnyBuffer indices, ffi::AnyBuffer updates,
                         ffi::AnyBuffer scale_buf, ffi::RemainingArgs rest,
                         ffi::Result<ffi::AnyBuffer> out, ffi::ThreadPool xla_pool) {
  XlaPoolScope pool_scope(&xla_pool);
  return Guarded("sparse_sgd", [&]() -> ffi::Error {
    if (auto e = CheckTableLike("sparse_sgd", table, *out, table); e.failure()) return e;
    const int64_t v = table.dimensions()[0], d = table.dimensions()[1];
    UpdateRows rows;
    if (auto e = GetUpdateRows("sparse_sgd", indices, updates, rest, d, &rows); e.failure())
      return e;
    if (updates.element_type() != ffi::DataType::F32)
      return ffi::Error::InvalidArgument("ember.sparse_sgd: updates must be f32");
    float scale;
    if (auto e = ScalarF32("sparse_sgd", scale_buf, &scale); e.failure()) return e;
    if (!Fma()) return ffi::Error::Internal("ember.sparse_sgd: needs a CPU with FMA");
    RowGroups& g = ScratchGroups();
    BuildRowGroups(indices.untyped_data(), indices.element_type() == ffi::DataType::S32,
                   indices.dimensions()[0], v, &g);
    const RowArray t = Pair(table, *out, d);
    ForRows(g, rows, v, d, !UntouchedUnchanged(scale), {t},
            [&](int64_t r) { PrefetchRow(t.dst + r * d, d); },
            [&](int64_t r, const float* grad) {
              SgdRow(t.dst + r * d, t.src + r * d, grad, scale, d);
            });
    return ffi::Error::Success();
  });
}

// optax's (Keras = false) or Keras' (Keras = true) Adagrad.
template <bool Keras>
ffi::Error AdagradImpl(ffi::AnyBuffer table, ffi::AnyBuffer accum, ffi::AnyBuffer indices,
                       ffi::AnyBuffer updates, ffi::AnyBuffer scale_buf, ffi::AnyBuffer eps_buf,
                       ffi::RemainingArgs rest, ffi::Result<ffi::AnyBuffer> out_table,
                       ffi::Result<ffi::AnyBuffer> out_accum, ffi::ThreadPool xla_pool) {
  XlaPoolScope pool_scope(&xla_pool);
  const char* name = Keras ? "sparse_adagrad_keras" : "sparse_adagrad";
  return Guarded(name, [&]() -> ffi::Error {
    if (auto e = CheckTableLike(name, table, *out_table, table); e.failure()) return e;
    if (auto e = CheckTableLike(name, accum, *out_accum, table); e.failure()) return e;
    const int64_t v = table.dimensions()[0], d = table.dimensions()[1];
    UpdateRows rows;
    if (auto e = GetUpdateRows(name, indices, updates, rest, d, &rows); e.failure()) return e;
    if (updates.element_type() != ffi::DataType::F32)
      return ffi::Error::InvalidArgument(std::string("ember.") + name + ": updates must be f32");
    float scale, eps;
    if (auto e = ScalarF32(name, scale_buf, &scale); e.failure()) return e;
    if (auto e = ScalarF32(name, eps_buf, &eps); e.failure()) return e;
    if (!Fma()) return ffi::Error::Internal(std::string("ember.") + name + ": needs FMA");
    RowGroups& g = ScratchGroups();
    BuildRowGroups(indices.untyped_data(), indices.element_type() == ffi::DataType::S32,
                   indices.dimensions()[0], v, &g);
    const RowArray t = Pair(table, *out_table, d), a = Pair(accum, *out_accum, d);
    // Keras: lr (not -lr) finite with its sign bit clear; the accumulators are checked per row
    const bool dense = Keras ? !(std::isfinite(scale) && !std::signbit(scale))
                             : !(UntouchedUnchanged(scale) && eps >= 0.0f);
    ForRows(g, rows, v, d, dense ? Untouched::kDense : Untouched::kCheck, {t, a},
            [&](int64_t r) {
              PrefetchRow(t.dst + r * d, d);
              PrefetchRow(a.dst + r * d, d);
            },
            [&](int64_t r, const float* grad) {
              AdagradRow<Keras>(t, a, r, grad, scale, eps, d);
            },
            [&](int64_t q, int64_t end) {
              return Keras ? FirstKerasChanged(a.src, eps, d, q, end)
                           : FirstWithNegativeZero(a.src, d, q, end);
            });
    return ffi::Error::Success();
  });
}

}  // namespace
}  // namespace ember

namespace {
__attribute__((target("avx2,fma"))) void ProbeBlock(const float* x, float* y) {
  _mm256_storeu_ps(y, ember::XlaRsqrt8(_mm256_loadu_ps(x)));
}
}  // namespace

// XLA's rsqrt as the Adagrad kernel computes it, for n floats (ctypes: the rewrite checks it
// against XLA:CPU on the running machine before it fuses an Adagrad update).
EMBER_EXPORT void EmberRsqrtProbe(const float* x, float* y, int64_t n) {
  if (!ember::Fma()) {  // the kernel refuses to run there; report a mismatch
    for (int64_t i = 0; i < n; ++i) y[i] = 0.0f;
    return;
  }
  int64_t i = 0;  // the vector path on whole blocks of 8, the scalar one on the rest
  for (; i + 8 <= n; i += 8) ProbeBlock(x + i, y + i);
  for (; i < n; ++i) y[i] = ember::XlaRsqrt(x[i]);
}

// The CPU's f32 reciprocal square-root estimate (rsqrtss: the bits XLA's rsqrt starts from),
// for n floats, and XLA's number of Newton-Raphson steps after it on this CPU (ctypes: the DAE
// program's `rsqrte` instruction and the lowering of the fused Adagrad update).
EMBER_EXPORT void EmberRsqrtEstimate(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = _mm_cvtss_f32(_mm_rsqrt_ss(_mm_set_ss(x[i])));
}

EMBER_EXPORT int EmberXlaRsqrtSteps() { return ember::kXlaRsqrtSteps; }

// Below this much work a fused update runs on the calling thread (sparse_update.h; ctypes:
// the test of the pooled path checks that its call is above it).
EMBER_EXPORT int64_t EmberSparseUpdateSerialFloats() { return ember::kSerialFloats; }

EMBER_HANDLER(EmberSparseSgd, ember::SparseSgdImpl,
              EMBER_ARRAYS_3.Arg<xla::ffi::AnyBuffer>()
                  .RemainingArgs()
                  .Ret<xla::ffi::AnyBuffer>()
                  .Ctx<xla::ffi::ThreadPool>());

// table, accumulator, indices, updates, scale, eps [, source_rows [, mask]] -> (table, accum)
#define EMBER_ADAGRAD_BINDING                      \
  EMBER_ARRAYS_3.Arg<xla::ffi::AnyBuffer>()        \
      .Arg<xla::ffi::AnyBuffer>()                  \
      .Arg<xla::ffi::AnyBuffer>()                  \
      .RemainingArgs()                             \
      .Ret<xla::ffi::AnyBuffer>()                  \
      .Ret<xla::ffi::AnyBuffer>()                  \
      .Ctx<xla::ffi::ThreadPool>()

EMBER_HANDLER(EmberSparseAdagrad, ember::AdagradImpl<false>, EMBER_ADAGRAD_BINDING);

EMBER_HANDLER(EmberSparseAdagradKeras, ember::AdagradImpl<true>, EMBER_ADAGRAD_BINDING);
