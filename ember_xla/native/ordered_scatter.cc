// ember.ordered_scatter: operand[V,D], indices[L], updates[L,D] -> [V,D] (attribute combiner:
// "add" or "subtract"): XLA's scatter of whole rows into a variable, as a TF/Keras optimizer's
// sparse apply writes it (ResourceScatterSub of lr * g into the table, ResourceScatterAdd of
// g * g into an Adagrad slot). XLA:CPU applies the updates one after another in index order,
// so a row hit by updates i1 < i2 < ... becomes ((t - u_i1) - u_i2) - ..., each operation
// rounded on its own; the kernel does exactly that, in parallel over the distinct rows
// (row_groups.h: each row's updates in index order), or, with many updates for the rows, by
// row ranges each scanning the ids in order (RunScan). Indices outside [0, V) are dropped, as
// XLA's scatter drops them. The result normally aliases the operand
// (output_to_operand_aliasing): only the touched rows are read and written; otherwise the
// operand is copied into the result first. f32 only.
#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>

#include "sparse_update.h"
#include "handler.h"

namespace ember {
namespace {

// o[j] = o[j] - u[j] (or + u[j]) for j < d, one IEEE operation per element.
template <bool kSubtract>
__attribute__((target("avx2"))) void ApplyRowAvx2(float* o, const float* u, int64_t d) {
  int64_t j = 0;
  for (; j + 8 <= d; j += 8) {
    const __m256 a = _mm256_loadu_ps(o + j), b = _mm256_loadu_ps(u + j);
    _mm256_storeu_ps(o + j, kSubtract ? _mm256_sub_ps(a, b) : _mm256_add_ps(a, b));
  }
  for (; j < d; ++j) o[j] = kSubtract ? o[j] - u[j] : o[j] + u[j];
}

template <bool kSubtract>
void ApplyRow(float* o, const float* u, int64_t d) {
  if (HaveAvx2()) return ApplyRowAvx2<kSubtract>(o, u, d);
  for (int64_t j = 0; j < d; ++j) o[j] = kSubtract ? o[j] - u[j] : o[j] + u[j];
}

template <bool kSubtract>
void Run(const RowGroups& g, const float* upd, int64_t d, float* out) {
  ParallelGroups(g, 0, [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; ++k) {
      if (k + 2 < k1) PrefetchRow(out + g.rows[k + 2] * d, d);
      float* o = out + g.rows[k] * d;
      const int32_t* pos = g.order.data() + g.start[k];
      for (int64_t i = 0, n = g.count(k); i < n; ++i) {
        if (i + 1 < n) __builtin_prefetch(upd + pos[i + 1] * d);
        ApplyRow<kSubtract>(o, upd + pos[i] * d, d);
      }
    }
  });
}

// Many updates for the rows (the updates at least an eighth of the rows, as in a GNN's
// residual h + segment_sum): each part takes a contiguous range of rows and scans the ids in
// index order, applying those in its range -- XLA:CPU's order per row, the updates read in
// order (grouping by row would read a large update array in random order), no grouping pass.
template <bool kSubtract, typename I>
void RunScan(const I* idx, int64_t n, int64_t v, const float* upd, int64_t d, float* out) {
  const int64_t parts =
      std::max<int64_t>(1, std::min<int64_t>(PoolThreads(), n * d / (int64_t{1} << 14)));
  RunCuts(EvenCuts(v, parts), [&](int64_t r0, int64_t r1) {
    for (int64_t j = 0; j < n; ++j) {
      if (j + 8 < n) {
        const int64_t ahead = static_cast<int64_t>(idx[j + 8]);
        if (ahead >= r0 && ahead < r1) PrefetchRow(out + ahead * d, d);
      }
      const int64_t r = static_cast<int64_t>(idx[j]);
      if (r >= r0 && r < r1) ApplyRow<kSubtract>(out + r * d, upd + j * d, d);
    }
  });
}

template <bool kSubtract>
void Scan(const ffi::AnyBuffer& indices, int64_t v, const float* upd, int64_t d, float* out) {
  const int64_t n = indices.dimensions()[0];
  if (indices.element_type() == ffi::DataType::S32)
    RunScan<kSubtract>(static_cast<const int32_t*>(indices.untyped_data()), n, v, upd, d, out);
  else
    RunScan<kSubtract>(static_cast<const int64_t*>(indices.untyped_data()), n, v, upd, d, out);
}

ffi::Error OrderedScatterImpl(ffi::AnyBuffer operand, ffi::AnyBuffer indices,
                              ffi::AnyBuffer updates, ffi::Result<ffi::AnyBuffer> out,
                              ffi::ThreadPool xla_pool, std::string_view combiner) {
  XlaPoolScope pool_scope(&xla_pool);
  const char* kind = "ordered_scatter";
  return Guarded(kind, [&]() -> ffi::Error {
    const auto dims = operand.dimensions();
    if (operand.element_type() != ffi::DataType::F32 ||
        out->element_type() != ffi::DataType::F32 || updates.element_type() != ffi::DataType::F32)
      return ffi::Error::InvalidArgument("ember.ordered_scatter: operand, updates and result "
                                         "must be f32");
    if (dims.size() != 2 || out->dimensions().size() != 2 || out->dimensions()[0] != dims[0] ||
        out->dimensions()[1] != dims[1])
      return ffi::Error::InvalidArgument("ember.ordered_scatter: operand and result must be "
                                         "[V, D] of one shape");
    if (combiner != "add" && combiner != "subtract")
      return ffi::Error::InvalidArgument("ember.ordered_scatter: combiner must be add or "
                                         "subtract, got " + std::string(combiner));
    const int64_t v = dims[0], d = dims[1];
    if (auto e = CheckGradOperands(kind, indices, updates, d); e.failure()) return e;
    const float* src = static_cast<const float*>(operand.untyped_data());
    float* dst = static_cast<float*>(out->untyped_data());
    if (src != dst)
      ParallelRows(v, 4096, [&](int64_t r0, int64_t r1) {
        std::memcpy(dst + r0 * d, src + r0 * d, static_cast<size_t>((r1 - r0) * d) * sizeof(float));
      });
    const float* upd = static_cast<const float*>(updates.untyped_data());
    if (indices.dimensions()[0] * 8 >= v) {
      if (combiner == "subtract")
        Scan<true>(indices, v, upd, d, dst);
      else
        Scan<false>(indices, v, upd, d, dst);
      return ffi::Error::Success();
    }
    RowGroups& g = ScratchGroups();
    BuildRowGroups(indices.untyped_data(), indices.element_type() == ffi::DataType::S32,
                   indices.dimensions()[0], v, &g);
    if (combiner == "subtract")
      Run<true>(g, upd, d, dst);
    else
      Run<false>(g, upd, d, dst);
    return ffi::Error::Success();
  });
}

}  // namespace
}  // namespace ember

EMBER_EXPORT XLA_FFI_Error* EmberOrderedScatter(XLA_FFI_CallFrame* call_frame);

XLA_FFI_DEFINE_HANDLER_SYMBOL(EmberOrderedScatter, ember::OrderedScatterImpl,
                              xla::ffi::Ffi::Bind()
                                  .Arg<xla::ffi::AnyBuffer>()
                                  .Arg<xla::ffi::AnyBuffer>()
                                  .Arg<xla::ffi::AnyBuffer>()
                                  .Ret<xla::ffi::AnyBuffer>()
                                  .Ctx<xla::ffi::ThreadPool>()
                                  .Attr<std::string_view>("combiner"));
