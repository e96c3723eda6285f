// Fused sparse optimizers: the gradient of a row lookup summed per touched row exactly as
// ember.scatter_grad sums it, then the optimizer applied to those rows of the table (and of its
// slot variables) in place; the result buffers alias the table operands
// (output_to_operand_aliasing), so a donated table is never copied.
//
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

__attribute__((target("sse,fma"))) void AdagradRow(float* t, float* a, const float* g, float s,
                                                   float eps, int64_t d) {
  for (int64_t j = 0; j < d; ++j) {
    const float acc = __builtin_fmaf(g[j], g[j], a[j]);
    const float scale = acc > 0.0f ? XlaRsqrt(acc + eps) : 0.0f;
    const float u = scale * g[j];
    t[j] = __builtin_fmaf(u, s, t[j]);
    a[j] = acc;
  }
}

bool Fma() {
  static const bool ok = __builtin_cpu_supports("fma") && __builtin_cpu_supports("sse");
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

// Runs row_fn(row, grad or nullptr) for the touched rows, and for untouched rows too when
// `dense`; grad is the row's summed gradient.
template <typename RowFn>
void ForRows(const RowGroups& g, const float* upd, int64_t v, int64_t d, bool dense,
             const RowFn& row_fn) {
  const int64_t n = static_cast<int64_t>(g.rows.size());
  const std::vector<float> zero(dense ? static_cast<size_t>(d) : 0, 0.0f);
  const int64_t total = dense ? v : n;
  ParallelRows(total, dense ? 4096 : 64, [&](int64_t i0, int64_t i1) {
    std::vector<float> acc(static_cast<size_t>(d));
    if (!dense) {
      for (int64_t k = i0; k < i1; ++k) {
        SumRow(upd, d, g.pos.data() + g.start[k], g.start[k + 1] - g.start[k], acc.data());
        row_fn(g.rows[k], acc.data());
      }
      return;
    }
    int64_t k = g.first_at_or_after(i0);
    for (int64_t r = i0; r < i1; ++r) {
      if (k < n && g.rows[k] == r) {
        SumRow(upd, d, g.pos.data() + g.start[k], g.start[k + 1] - g.start[k], acc.data());
        row_fn(r, acc.data());
        ++k;
      } else {
        row_fn(r, zero.data());
      }
    }
  });
}

// Does t + 0 * scale leave every t (including -0) unchanged? Only for a finite negative scale.
bool UntouchedUnchanged(float scale) { return std::isfinite(scale) && std::signbit(scale); }

ffi::Error SparseSgdImpl(ffi::AnyBuffer table, ffi::AnyBuffer indices, ffi::AnyBuffer updates,
                         ffi::AnyBuffer scale_buf, ffi::Result<ffi::AnyBuffer> out,
                         ffi::ThreadPool xla_pool) {
  XlaPoolScope pool_scope(&xla_pool);
  return Guarded("sparse_sgd", [&]() -> ffi::Error {
    if (auto e = CheckTableLike("sparse_sgd", table, *out, table); e.failure()) return e;
    const int64_t v = table.dimensions()[0], d = table.dimensions()[1];
    if (auto e = CheckGradOperands("sparse_sgd", indices, updates, d); e.failure()) return e;
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
    ForRows(g, static_cast<const float*>(updates.untyped_data()), v, d,
            !UntouchedUnchanged(scale),
            [&](int64_t r, const float* grad) { SgdRow(t + r * d, grad, scale, d); });
    return ffi::Error::Success();
  });
}

ffi::Error SparseAdagradImpl(ffi::AnyBuffer table, ffi::AnyBuffer accum, ffi::AnyBuffer indices,
                             ffi::AnyBuffer updates, ffi::AnyBuffer scale_buf,
                             ffi::AnyBuffer eps_buf, ffi::Result<ffi::AnyBuffer> out_table,
                             ffi::Result<ffi::AnyBuffer> out_accum, ffi::ThreadPool xla_pool) {
  XlaPoolScope pool_scope(&xla_pool);
  return Guarded("sparse_adagrad", [&]() -> ffi::Error {
    if (auto e = CheckTableLike("sparse_adagrad", table, *out_table, table); e.failure())
      return e;
    if (auto e = CheckTableLike("sparse_adagrad", accum, *out_accum, table); e.failure())
      return e;
    const int64_t v = table.dimensions()[0], d = table.dimensions()[1];
    if (auto e = CheckGradOperands("sparse_adagrad", indices, updates, d); e.failure()) return e;
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
    ForRows(g, static_cast<const float*>(updates.untyped_data()), v, d, dense,
            [&](int64_t r, const float* grad) {
              AdagradRow(t + r * d, a + r * d, grad, scale, eps, d);
            });
    return ffi::Error::Success();
  });
}

}  // namespace
}  // namespace ember

// XLA's rsqrt as the Adagrad kernel computes it, for n floats (ctypes: the rewrite checks it
// against XLA:CPU on the running machine before it fuses an Adagrad update).
EMBER_EXPORT void EmberRsqrtProbe(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = ember::XlaRsqrt(x[i]);
}

EMBER_EXPORT XLA_FFI_Error* EmberSparseSgd(XLA_FFI_CallFrame* call_frame);
EMBER_EXPORT XLA_FFI_Error* EmberSparseAdagrad(XLA_FFI_CallFrame* call_frame);

XLA_FFI_DEFINE_HANDLER_SYMBOL(EmberSparseSgd, ember::SparseSgdImpl,
                              xla::ffi::Ffi::Bind()
                                  .Arg<xla::ffi::AnyBuffer>()
                                  .Arg<xla::ffi::AnyBuffer>()
                                  .Arg<xla::ffi::AnyBuffer>()
                                  .Arg<xla::ffi::AnyBuffer>()
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
                                  .Ret<xla::ffi::AnyBuffer>()
                                  .Ret<xla::ffi::AnyBuffer>()
                                  .Ctx<xla::ffi::ThreadPool>());
