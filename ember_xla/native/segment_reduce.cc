// ember.segment_reduce: T[N,D], indices[L], segment_ids[L] (+ weights[L]) -> [S,D].
// Lookup j goes to row segment_ids[j]; ids outside [0, S) are dropped (scatter semantics).
#include "handler.h"
#include "pool.h"
#include "reduce.h"

#ifdef EMBER_TRACE_CALLS
#include <chrono>
#include <cstdio>
#include <thread>
#endif

namespace ember {
namespace {

#ifdef EMBER_TRACE_CALLS
struct TraceCall {
  static int64_t Now() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  TraceCall(const char* k, size_t n) : kind(k), lookups(n), t0(Now()) {}
  ~TraceCall() {
    std::fprintf(stderr, "EMBER_TRACE %s tid=%zx lookups=%zu start=%lld end=%lld\n", kind,
                 std::hash<std::thread::id>()(std::this_thread::get_id()), lookups,
                 static_cast<long long>(t0), static_cast<long long>(Now()));
  }
  const char* kind;
  size_t lookups;
  int64_t t0;
};
#endif

ffi::Error SegmentReduceImpl(ffi::AnyBuffer table, ffi::AnyBuffer indices,
                             ffi::AnyBuffer segment_ids, ffi::RemainingArgs rest,
                             ffi::Result<ffi::AnyBuffer> out, ffi::ThreadPool xla_pool,
                             std::string_view combiner,
                             std::string_view index_mode, bool wrap_negative, bool weighted,
                             double init, int64_t index_bits) {
  XlaPoolScope pool_scope(&xla_pool);
#ifdef EMBER_TRACE_CALLS  // debug builds only: which thread runs each call, and when
  TraceCall trace("segment_reduce", indices.element_count());
#endif
  return Guarded("segment_reduce", [&]() -> ffi::Error {
    Options opt;
    if (auto e = ParseOptions(combiner, index_mode, wrap_negative, weighted, init,
                                   index_bits, &opt);
        e.failure())
      return e;
    if (auto e = CheckTableAndResult(table, *out); e.failure()) return e;
    if (indices.dimensions().size() != 1 || segment_ids.dimensions().size() != 1)
      return ffi::Error::InvalidArgument(
          "ember.segment_reduce: indices and segment_ids must have rank 1");
    if (indices.dimensions()[0] != segment_ids.dimensions()[0])
      return ffi::Error::InvalidArgument(
          "ember.segment_reduce: indices has " + std::to_string(indices.dimensions()[0]) +
          " elements but segment_ids has " + std::to_string(segment_ids.dimensions()[0]));
    const void* weights = nullptr;
    ffi::DataType wtype;
    if (auto e = GetWeights(rest, opt, table, *out, indices, &weights, &wtype); e.failure())
      return e;

    Plan& plan = ScratchPlan(indices.dimensions()[0], out->dimensions()[0]);
    if (auto e = BuildSegmentPlan(indices, segment_ids, table.dimensions()[0], opt,
                                  weights != nullptr, &plan);
        e.failure())
      return e;
    return RunPlan(table, plan, weights, wtype, opt, *out);
  });
}

}  // namespace
}  // namespace ember

EMBER_HANDLER(EmberSegmentReduce, ember::SegmentReduceImpl, EMBER_REDUCTION_BINDING(EMBER_ARRAYS_3));
