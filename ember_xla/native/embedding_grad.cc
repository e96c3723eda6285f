// ember.scatter_grad: indices[L], updates[L,D] -> [V,D]: the dense gradient of a row lookup,
// zeros(V, D) with each update added to row indices[i], exactly XLA's scatter-add (updates in
// index order per row; indices outside [0, V) dropped). Rows are split across the pool; each
// part zeroes its own row range and sums the touched rows inside it.
#include <cstring>
#include <vector>

#include "grad_common.h"
#include "handler.h"

namespace ember {
namespace {

template <typename T>
void Run(const RowGroups& g, const T* upd, int64_t v, int64_t d, T* out) {
  ParallelRows(v, 4096, [&](int64_t r0, int64_t r1) {
    std::memset(out + r0 * d, 0, static_cast<size_t>((r1 - r0) * d) * sizeof(T));
    std::vector<float> acc(static_cast<size_t>(d));
    for (int64_t k = g.first_at_or_after(r0); k < static_cast<int64_t>(g.rows.size()) &&
                                              g.rows[k] < r1; ++k) {
      SumRow(upd, d, g.pos.data() + g.start[k], g.start[k + 1] - g.start[k], acc.data());
      T* row = out + g.rows[k] * d;
      for (int64_t j = 0; j < d; ++j) row[j] = Elem<T>::Store(acc[j]);
    }
  });
}

ffi::Error ScatterGradImpl(ffi::AnyBuffer indices, ffi::AnyBuffer updates,
                           ffi::Result<ffi::AnyBuffer> out, ffi::ThreadPool xla_pool) {
  XlaPoolScope pool_scope(&xla_pool);
  return Guarded("scatter_grad", [&]() -> ffi::Error {
    if (out->dimensions().size() != 2)
      return ffi::Error::InvalidArgument("ember.scatter_grad: the result must be [V, D]");
    const int64_t v = out->dimensions()[0], d = out->dimensions()[1];
    if (auto e = CheckGradOperands("scatter_grad", indices, updates, d); e.failure()) return e;
    if (updates.element_type() != out->element_type())
      return ffi::Error::InvalidArgument("ember.scatter_grad: updates and result types differ");
    RowGroups& g = ScratchGroups();
    BuildRowGroups(indices.untyped_data(), indices.element_type() == ffi::DataType::S32,
                   indices.dimensions()[0], v, &g);
    switch (out->element_type()) {
      case ffi::DataType::F32:
        Run(g, static_cast<const float*>(updates.untyped_data()), v, d,
            static_cast<float*>(out->untyped_data()));
        break;
      case ffi::DataType::BF16:
        Run(g, static_cast<const bf16*>(updates.untyped_data()), v, d,
            static_cast<bf16*>(out->untyped_data()));
        break;
      case ffi::DataType::F16:
        Run(g, static_cast<const f16*>(updates.untyped_data()), v, d,
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

EMBER_EXPORT XLA_FFI_Error* EmberScatterGrad(XLA_FFI_CallFrame* call_frame);

XLA_FFI_DEFINE_HANDLER_SYMBOL(EmberScatterGrad, ember::ScatterGradImpl,
                              xla::ffi::Ffi::Bind()
                                  .Arg<xla::ffi::AnyBuffer>()
                                  .Arg<xla::ffi::AnyBuffer>()
                                  .Ret<xla::ffi::AnyBuffer>()
                                  .Ctx<xla::ffi::ThreadPool>());
