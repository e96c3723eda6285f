// ember.offsets_bag: T[N,D], indices[L], offsets[B+1] (+ weights[L]) -> [B,D];
// bag b is indices[offsets[b] .. offsets[b+1]). Offsets must be non-decreasing within [0, L].
#include "handler.h"
#include "pool.h"
#include "reduce.h"

namespace ember {
namespace {

ffi::Error OffsetsBagImpl(ffi::AnyBuffer table, ffi::AnyBuffer indices, ffi::AnyBuffer offsets,
                          ffi::RemainingArgs rest, ffi::Result<ffi::AnyBuffer> out,
                          ffi::ThreadPool xla_pool, std::string_view combiner,
                          std::string_view index_mode, bool wrap_negative, bool weighted,
                          double init, int64_t index_bits) {
  XlaPoolScope pool_scope(&xla_pool);
  return Guarded("offsets_bag", [&]() -> ffi::Error {
    Options opt;
    if (auto e = ParseOptions(combiner, index_mode, wrap_negative, weighted, init,
                                   index_bits, &opt);
        e.failure())
      return e;
    if (auto e = CheckTableAndResult(table, *out); e.failure()) return e;
    if (indices.dimensions().size() != 1 || offsets.dimensions().size() != 1)
      return ffi::Error::InvalidArgument(
          "ember.offsets_bag: indices and offsets must have rank 1");
    const int64_t bags = out->dimensions()[0];
    const int64_t count = indices.dimensions()[0];
    if (offsets.dimensions()[0] != bags + 1)
      return ffi::Error::InvalidArgument(
          "ember.offsets_bag: offsets must have B+1 = " + std::to_string(bags + 1) +
          " elements for " + std::to_string(bags) + " result rows, got " +
          std::to_string(offsets.dimensions()[0]));
    const void* weights = nullptr;
    ffi::DataType wtype;
    if (auto e = GetWeights(rest, opt, table, *out, indices, &weights, &wtype); e.failure())
      return e;

    Plan& plan = ScratchPlan(count, bags);
    if (auto e = ReadInts(offsets, "offsets", &plan.row_ptr); e.failure()) return e;
    for (int64_t b = 0; b <= bags; ++b) {
      const int64_t o = plan.row_ptr[b];
      if (o < 0 || o > count || (b > 0 && o < plan.row_ptr[b - 1]))
        return ffi::Error::InvalidArgument(
            "ember.offsets_bag: offsets must be non-decreasing within [0, " +
            std::to_string(count) + "]; offsets[" + std::to_string(b) + "] = " +
            std::to_string(o));
    }
    if (auto e = ResolveIndices(indices, table.dimensions()[0], opt, &plan.src); e.failure())
      return e;
    return RunPlan(table, plan, weights, wtype, opt, *out);
  });
}

}  // namespace
}  // namespace ember

EMBER_HANDLER(EmberOffsetsBag, ember::OffsetsBagImpl, EMBER_REDUCTION_BINDING(EMBER_ARRAYS_3));
