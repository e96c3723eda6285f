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
//
// Rows without gradient are left alone only when the dense update provably leaves them
// unchanged (scale finite with its sign bit set, eps >= 0); otherwise the kernel applies the
// update with g = 0 to every untouched row as well, which is what XLA computes. f32 only.
#include <cmath>
#include <cstring>
#include <vector>

#include "grad_common.h"
#include "handler.h"
#include "xla_rsqrt.h"

namespace ember {
namespace {

__attribute__((target("fma"))) void SgdRow(float* t, const float* g, float s, int64_t d) {
  for (int64_t j = 0; j < d; ++j) t[j] = __builtin_fmaf(g[j], s, t[j]);
}

__attribute__((target("avx2,fma"))) void AdagradRow(float* t, float* a, const float* g, float s,
                                                    float eps, int64_t d) {
  int64_t j = 0;
  const __m256 vs = _mm256_set1_ps(s), ve = _mm256_set1_ps(eps), zero = _mm256_setzero_ps();
  for (; j + 8 <= d; j += 8) {
    const __m256 gj = _mm256_loadu_ps(g + j);
    const __m256 acc = _mm256_fmadd_ps(gj, gj, _mm256_loadu_ps(a + j));
    const __m256 r = XlaRsqrt8(_mm256_add_ps(acc, ve));
    const __m256 scale = _mm256_blendv_ps(zero, r, _mm256_cmp_ps(acc, zero, _CMP_GT_OQ));
    const __m256 u = _mm256_mul_ps(scale, gj);
    _mm256_storeu_ps(t + j, _mm256_fmadd_ps(u, vs, _mm256_loadu_ps(t + j)));
    _mm256_storeu_ps(a + j, acc);
  }
  for (; j < d; ++j) {
    const float acc = __builtin_fmaf(g[j], g[j], a[j]);
    const float scale = acc > 0.0f ? XlaRsqrt(acc + eps) : 0.0f;
    const float u = scale * g[j];
    t[j] = __builtin_fmaf(u, s, t[j]);
    a[j] = acc;
  }
}

// Asks for the cache lines of row [p, p + d) to be written soon.
void PrefetchRow(const float* p, int64_t d) {
  for (int64_t j = 0; j < d; j += 16) __builtin_prefetch(p + j, 1);
}

bool Fma() {
  static const bool ok = __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2");
  return ok;
}

ffi::Error CheckTableLike(const char* kind, const ffi::AnyBuffer& in, const ffi::AnyBuffer& out,
                          const ffi::AnyBuffer& table) {
  if (in.element_type() != ffi::DataType::F32 || out.element_type() != ffi::DataType::F32)
    return ffi::Error::InvalidArgument(std::string("ember.") + kind + ": tables must be f32");
  if (in.dimensions().size() != 2 || out.dimensions().size() != 2 ||
      in.dimensions()[0] != table.dimensions()[0] || in.dimensions()[1] != table.dimensions()[1] ||
      out.dimensions()[0] != in.dimensions()[0] || out.dimensions()[1] != in.dimensions()[1])
    return ffi::Error::InvalidArgument(std::string("ember.") + kind +
                                       ": table, slots and results must all be [V, D]");
  return ffi::Error::Success();
}

ffi::Error ScalarF32(const char* kind, const ffi::AnyBuffer& b, float* out) {
  if (b.element_type() != ffi::DataType::F32 || b.element_count() != 1)
    return ffi::Error::InvalidArgument(std::string("ember.") + kind +
                                       ": scalars must be f32[]");
  *out = *static_cast<const float*>(b.untyped_data());
  return ffi::Error::Success();
}

// The in-place start: results alias the operands; a copy only if XLA gave separate buffers.
void CopyIfDistinct(const ffi::AnyBuffer& in, ffi::AnyBuffer& out) {
  if (in.untyped_data() == out.untyped_data()) return;
  const int64_t v = in.dimensions()[0], d = in.dimensions()[1];
  const float* src = static_cast<const float*>(in.untyped_data());
  float* dst = static_cast<float*>(out.untyped_data());
  ParallelRows(v, 4096, [&](int64_t r0, int64_t r1) {
    std::memcpy(dst + r0 * d, src + r0 * d, static_cast<size_t>((r1 - r0) * d) * sizeof(float));
  });
}

// Runs row_fn(row, grad) for the touched rows, grad the row's summed gradient (summed in
// registers per part: O(D) scratch); ahead(row) first for a row two groups later (prefetch);
// then, when `dense`, row_fn(row, 0) for every untouched row.
template <typename AheadFn, typename RowFn>
void ForRows(const RowGroups& g, const UpdateRows& upd, int64_t v, int64_t d, bool dense,
             const AheadFn& ahead, const RowFn& row_fn) {
  ParallelGroups(g, [&](int64_t k0, int64_t k1) {
    ForGroupRange<float>(
        g, upd, d, k0, k1, [&](int64_t k) { ahead(g.rows[k]); },
        [&](int64_t k, const float* acc) { row_fn(g.rows[k], acc); });
  });
  if (!dense) return;
  const int64_t n = static_cast<int64_t>(g.rows.size());
  const std::vector<float> zero(static_cast<size_t>(d), 0.0f);
  ParallelRows(v, 4096, [&](int64_t r0, int64_t r1) {
    int64_t k = g.first_at_or_after(r0);
    for (int64_t r = r0; r < r1; ++r) {
      if (k < n && g.rows[k] == r) {
        ++k;
        continue;
      }
      row_fn(r, zero.data());
    }
  });
}

// Does t + 0 * scale leave every t (including -0) unchanged? Only for a finite negative scale.
bool UntouchedUnchanged(float scale) { return std::isfinite(scale) && std::signbit(scale); }

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
    CopyIfDistinct(table, *out);
    float* t = static_cast<float*>(out->untyped_data());
    ForRows(g, rows, v, d, !UntouchedUnchanged(scale),
            [&](int64_t r) { PrefetchRow(t + r * d, d); },
            [&](int64_t r, const float* grad) { SgdRow(t + r * d, grad, scale, d); });
    return ffi::Error::Success();
  });
}

ffi::Error SparseAdagradImpl(ffi::AnyBuffer table, ffi::AnyBuffer accum, ffi::AnyBuffer indices,
                             ffi::AnyBuffer updates, ffi::AnyBuffer scale_buf,
                             ffi::AnyBuffer eps_buf, ffi::RemainingArgs rest,
                             ffi::Result<ffi::AnyBuffer> out_table,
                             ffi::Result<ffi::AnyBuffer> out_accum, ffi::ThreadPool xla_pool) {
  XlaPoolScope pool_scope(&xla_pool);
  return Guarded("sparse_adagrad", [&]() -> ffi::Error {
    if (auto e = CheckTableLike("sparse_adagrad", table, *out_table, table); e.failure())
      return e;
    if (auto e = CheckTableLike("sparse_adagrad", accum, *out_accum, table); e.failure())
      return e;
    const int64_t v = table.dimensions()[0], d = table.dimensions()[1];
    UpdateRows rows;
    if (auto e = GetUpdateRows("sparse_adagrad", indices, updates, rest, d, &rows); e.failure())
      return e;
    if (updates.element_type() != ffi::DataType::F32)
      return ffi::Error::InvalidArgument("ember.sparse_adagrad: updates must be f32");
    float scale, eps;
    if (auto e = ScalarF32("sparse_adagrad", scale_buf, &scale); e.failure()) return e;
    if (auto e = ScalarF32("sparse_adagrad", eps_buf, &eps); e.failure()) return e;
    if (!Fma()) return ffi::Error::Internal("ember.sparse_adagrad: needs a CPU with FMA");
    RowGroups& g = ScratchGroups();
    BuildRowGroups(indices.untyped_data(), indices.element_type() == ffi::DataType::S32,
                   indices.dimensions()[0], v, &g);
    CopyIfDistinct(table, *out_table);
    CopyIfDistinct(accum, *out_accum);
    float* t = static_cast<float*>(out_table->untyped_data());
    float* a = static_cast<float*>(out_accum->untyped_data());
    const bool dense = !(UntouchedUnchanged(scale) && eps >= 0.0f);
    ForRows(g, rows, v, d, dense,
            [&](int64_t r) {
              PrefetchRow(t + r * d, d);
              PrefetchRow(a + r * d, d);
            },
            [&](int64_t r, const float* grad) {
              AdagradRow(t + r * d, a + r * d, grad, scale, eps, d);
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

EMBER_EXPORT XLA_FFI_Error* EmberSparseSgd(XLA_FFI_CallFrame* call_frame);
EMBER_EXPORT XLA_FFI_Error* EmberSparseAdagrad(XLA_FFI_CallFrame* call_frame);

XLA_FFI_DEFINE_HANDLER_SYMBOL(EmberSparseSgd, ember::SparseSgdImpl,
                              xla::ffi::Ffi::Bind()
                                  .Arg<xla::ffi::AnyBuffer>()
                                  .Arg<xla::ffi::AnyBuffer>()
                                  .Arg<xla::ffi::AnyBuffer>()
                                  .Arg<xla::ffi::AnyBuffer>()
                                  .RemainingArgs()
                                  .Ret<xla::ffi::AnyBuffer>()
                                  .Ctx<xla::ffi::ThreadPool>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(EmberSparseAdagrad, ember::SparseAdagradImpl,
                              xla::ffi::Ffi::Bind()
                                  .Arg<xla::ffi::AnyBuffer>()
                                  .Arg<xla::ffi::AnyBuffer>()
                                  .Arg<xla::ffi::AnyBuffer>()
                                  .Arg<xla::ffi::AnyBuffer>()
                                  .Arg<xla::ffi::AnyBuffer>()
                                  .Arg<xla::ffi::AnyBuffer>()
                                  .RemainingArgs()
                                  .Ret<xla::ffi::AnyBuffer>()
                                  .Ret<xla::ffi::AnyBuffer>()
                                  .Ctx<xla::ffi::ThreadPool>());
