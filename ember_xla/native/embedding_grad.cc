// ember.scatter_grad: indices[L], updates[L,D] -> [V,D]: the dense gradient of a row lookup,
// (gathered form: indices[L], source[S,D], source_rows[L] [, mask[L]], see grad_common.h)
// zeros(V, D) with each update added to row indices[i], exactly XLA's scatter-add (updates in
// index order per row; indices outside [0, V) dropped). The zeros are written by row ranges
// across the pool, then each part sums its touched rows' updates and writes them (row_groups.h).
#include <cstring>

#include "grad_common.h"
#include "handler.h"
#include "pages.h"

namespace ember {
namespace {

template <typename T>
void Run(const RowGroups& g, const UpdateRows& upd, int64_t v, int64_t d, T* out) {
  ParallelRows(v, 4096, [&](int64_t r0, int64_t r1) {
    std::memset(out + r0 * d, 0, static_cast<size_t>((r1 - r0) * d) * sizeof(T));
  });
  const GroupedRows rows = ResolveRows(g, upd);
  ParallelGroups(g, [&](int64_t k0, int64_t k1) {
    ForGroupRange<T>(
        g, rows, d, k0, k1, [&](int64_t k) { __builtin_prefetch(out + g.rows[k] * d, 1); },
        [&](int64_t k, const float* acc) {
          T* o = out + g.rows[k] * d;
          for (int64_t j = 0; j < d; ++j) o[j] = Elem<T>::Store(acc[j]);
        });
  });
}

ffi::Error ScatterGradImpl(ffi::AnyBuffer indices, ffi::AnyBuffer updates,
                           ffi::RemainingArgs rest, ffi::Result<ffi::AnyBuffer> out,
                           ffi::ThreadPool xla_pool) {
  XlaPoolScope pool_scope(&xla_pool);
  return Guarded("scatter_grad", [&]() -> ffi::Error {
    if (out->dimensions().size() != 2)
      return ffi::Error::InvalidArgument("ember.scatter_grad: the result must be [V, D]");
    const int64_t v = out->dimensions()[0], d = out->dimensions()[1];
    UpdateRows rows;
    if (auto e = GetUpdateRows("scatter_grad", indices, updates, rest, d, &rows); e.failure())
      return e;
    if (updates.element_type() != out->element_type())
      return ffi::Error::InvalidArgument("ember.scatter_grad: updates and result types differ");
    AdviseOutput(out->untyped_data(), out->size_bytes());  // fresh and written whole: huge pages
    RowGroups& g = ScratchGroups();
    BuildRowGroups(indices.untyped_data(), indices.element_type() == ffi::DataType::S32,
                   indices.dimensions()[0], v, &g);
    switch (out->element_type()) {
      case ffi::DataType::F32:
        Run(g, rows, v, d,
            static_cast<float*>(out->untyped_data()));
        break;
      case ffi::DataType::BF16:
        Run(g, rows, v, d,
            static_cast<bf16*>(out->untyped_data()));
        break;
      case ffi::DataType::F16:
        Run(g, rows, v, d,
            static_cast<f16*>(out->untyped_data()));
        break;
      default:
        return ffi::Error::InvalidArgument("ember.scatter_grad: updates must be f32/bf16/f16");
    }
    return ffi::Error::Success();
  });
}

}  // namespace
}  // namespace ember

EMBER_HANDLER(EmberScatterGrad, ember::ScatterGradImpl,
              EMBER_ARRAYS_2.RemainingArgs()
                  .Ret<xla::ffi::AnyBuffer>()
                  .Ctx<xla::ffi::ThreadPool>());
