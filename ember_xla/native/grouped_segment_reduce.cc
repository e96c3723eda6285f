// ember.grouped_segment_reduce: k tables in one call (table-batched, like FBGEMM's TBE).
// Operands T_1, I_1, S_1, ..., T_k, I_k, S_k (each triple exactly ember.segment_reduce's
// unweighted operands); results a tuple of out_k [S_k, D_k]; the six segment_reduce attributes
// apply to every table (weighted must be false). Per table the result is bit-identical to
// ember.segment_reduce; all tables' rows are reduced in one parallel loop.
#include <string>
#include <vector>

#ifdef EMBER_TRACE_CALLS  // debug builds only: time of the plan and reduce phases
#include <chrono>
#include <cstdio>
#define EMBER_NOW() std::chrono::steady_clock::now()
#define EMBER_MS(a, b) std::chrono::duration<double, std::milli>((b) - (a)).count()
#endif

#include "handler.h"
#include "pool.h"
#include "reduce.h"

namespace ember {
namespace {

ffi::Error GroupedSegmentReduceImpl(ffi::RemainingArgs args, ffi::RemainingRets rets,
                                    ffi::ThreadPool xla_pool, std::string_view combiner,
                                    std::string_view index_mode, bool wrap_negative,
                                    bool weighted, double init, int64_t index_bits) {
  XlaPoolScope pool_scope(&xla_pool);
  return Guarded("grouped_segment_reduce", [&]() -> ffi::Error {
    const std::string who = "ember.grouped_segment_reduce: ";
    Options opt;
    if (auto e = ParseOptions(combiner, index_mode, wrap_negative, weighted, init, index_bits,
                              &opt);
        e.failure())
      return e;
    if (opt.weighted)
      return ffi::Error::InvalidArgument(who + "weighted=true is not supported");
    if (args.size() == 0 || args.size() % 3 != 0)
      return ffi::Error::InvalidArgument(
          who + "operands must be k >= 1 triples (table, indices, segment_ids); got " +
          std::to_string(args.size()) + " operands");
    const size_t k = args.size() / 3;
    if (rets.size() != k)
      return ffi::Error::InvalidArgument(who + std::to_string(k) + " tables need " +
                                         std::to_string(k) + " results, got " +
                                         std::to_string(rets.size()));
    std::vector<ffi::AnyBuffer> tables, indices, segs, outs;
    for (size_t t = 0; t < k; ++t) {
      auto tb = args.get<ffi::AnyBuffer>(3 * t);
      auto ib = args.get<ffi::AnyBuffer>(3 * t + 1);
      auto sb = args.get<ffi::AnyBuffer>(3 * t + 2);
      auto ob = rets.get<ffi::AnyBuffer>(t);
      if (tb.has_error() || ib.has_error() || sb.has_error() || ob.has_error())
        return ffi::Error::InvalidArgument(who + "operands and results must be arrays");
      tables.push_back(*tb);
      indices.push_back(*ib);
      segs.push_back(*sb);
      outs.push_back(**ob);
      const std::string tn = "table " + std::to_string(t) + ": ";
      if (auto e = CheckTableAndResult(tables[t], outs[t]); e.failure())
        return ffi::Error::InvalidArgument(who + tn + e.message());
      if (indices[t].dimensions().size() != 1 || segs[t].dimensions().size() != 1)
        return ffi::Error::InvalidArgument(who + tn +
                                           "indices and segment_ids must have rank 1");
      if (indices[t].dimensions()[0] != segs[t].dimensions()[0])
        return ffi::Error::InvalidArgument(
            who + tn + "indices has " + std::to_string(indices[t].dimensions()[0]) +
            " elements but segment_ids has " + std::to_string(segs[t].dimensions()[0]));
      for (const ffi::AnyBuffer* b : {&indices[t], &segs[t]})
        if (b->element_type() != ffi::DataType::S32 && b->element_type() != ffi::DataType::S64)
          return ffi::Error::InvalidArgument(who + tn +
                                             "indices and segment_ids must be s32 or s64");
      if (opt.clip && tables[t].dimensions()[0] == 0 && indices[t].element_count() > 0)
        return ffi::Error::InvalidArgument(
            who + tn + "index_mode=clip needs a table with at least one row");
    }

#ifdef EMBER_TRACE_CALLS
    const auto t0 = EMBER_NOW();
#endif
    std::vector<Plan*> plans(k);
    for (size_t t = 0; t < k; ++t)
      plans[t] = &ScratchPlanAt(t, indices[t].dimensions()[0], outs[t].dimensions()[0]);
    // Plans are independent: build them in parallel (one part per table). Everything that can
    // fail was checked above; an exception (out of memory) is caught here, never left to
    // escape on one of XLA's threads.
    std::vector<std::string> errors(k);
    PoolRun(static_cast<int64_t>(k), [&](int64_t t) {
      try {
        if (auto e = ResolveIndices(indices[t], tables[t].dimensions()[0], opt, &plans[t]->src);
            e.failure())
          errors[t] = e.message();
        else if (auto e2 = SortBySegment(segs[t], false, plans[t]); e2.failure())
          errors[t] = e2.message();
      } catch (const std::exception& ex) {
        errors[t] = ex.what();
      }
    });
    for (size_t t = 0; t < k; ++t)
      if (!errors[t].empty())
        return ffi::Error::InvalidArgument(who + "table " + std::to_string(t) + ": " + errors[t]);

    std::vector<GroupItem> items(k);
    for (size_t t = 0; t < k; ++t) items[t] = GroupItem{&tables[t], plans[t], &outs[t]};
#ifdef EMBER_TRACE_CALLS
    const auto t1 = EMBER_NOW();
    auto e = RunGroupedPlans(items.data(), static_cast<int64_t>(k), opt);
    std::fprintf(stderr, "EMBER_TRACE grouped plan %.2f ms reduce %.2f ms threads %lld\n",
                 EMBER_MS(t0, t1), EMBER_MS(t1, EMBER_NOW()),
                 static_cast<long long>(PoolThreads()));
    return e;
#else
    return RunGroupedPlans(items.data(), static_cast<int64_t>(k), opt);
#endif
  });
}

}  // namespace
}  // namespace ember

EMBER_EXPORT XLA_FFI_Error* EmberGroupedSegmentReduce(XLA_FFI_CallFrame* call_frame);

XLA_FFI_DEFINE_HANDLER_SYMBOL(EmberGroupedSegmentReduce, ember::GroupedSegmentReduceImpl,
                              EMBER_BIND_ATTRS(xla::ffi::Ffi::Bind()
                                                   .RemainingArgs()
                                                   .RemainingRets()
                                                   .Ctx<xla::ffi::ThreadPool>()));
