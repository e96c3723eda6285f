// ember.grouped_segment_reduce: k tables in one call (table-batched, like FBGEMM's TBE).
// ember.grouped_segment_reduce_concat: the same operands and attributes, one result
// [S, D_1 + ... + D_k]: table t's pooled rows written straight into columns
// [D_1 + ... + D_{t-1}, ...) (what concatenate(out_1, ..., out_k, dimension=1) gives), so
// there are no per-table result buffers and no separate concatenate.
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
#include "pages.h"
#include "pool.h"
#include "reduce.h"

namespace ember {
namespace {

// Below this many lookups in all, the plans are built on the calling thread.
constexpr int64_t kParallelPlanLookups = int64_t{1} << 15;

// The concatenated form: a valid table whose type the (shared) result has, or an f32 result.
ffi::Error CheckConcatTable(const ffi::AnyBuffer& table, const ffi::AnyBuffer& out) {
  const auto t = table.element_type();
  if (t != ffi::DataType::F32 && t != ffi::DataType::BF16 && t != ffi::DataType::F16)
    return ffi::Error::InvalidArgument("table must be f32, bf16 or f16, got " +
                                       std::string(DtypeName(t)));
  if (table.dimensions().size() != 2)
    return ffi::Error::InvalidArgument("table must have rank 2 [N, D]");
  if (out.element_type() != t && out.element_type() != ffi::DataType::F32)
    return ffi::Error::InvalidArgument("result type " + std::string(DtypeName(out.element_type())) +
                                       " must be the table's type (" +
                                       std::string(DtypeName(t)) + ") or f32");
  return ffi::Error::Success();
}

// `rets` (tuple form) or `concat` (concatenated form) is given, the other is null.
ffi::Error Grouped(ffi::RemainingArgs args, ffi::RemainingRets* rets, ffi::AnyBuffer* concat,
                   std::string_view combiner, std::string_view index_mode, bool wrap_negative,
                   bool weighted, double init, int64_t index_bits) {
  const char* kind = concat ? "grouped_segment_reduce_concat" : "grouped_segment_reduce";
  return Guarded(kind, [&]() -> ffi::Error {
    const std::string who = std::string("ember.") + kind + ": ";
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
    if (rets != nullptr && rets->size() != k)
      return ffi::Error::InvalidArgument(who + std::to_string(k) + " tables need " +
                                         std::to_string(k) + " results, got " +
                                         std::to_string(rets->size()));
    std::vector<ffi::AnyBuffer> tables, indices, segs, outs;
    std::vector<int64_t> column(k + 1, 0);  // concatenated form: table t's first column
    for (size_t t = 0; t < k; ++t) {
      auto tb = args.get<ffi::AnyBuffer>(3 * t);
      auto ib = args.get<ffi::AnyBuffer>(3 * t + 1);
      auto sb = args.get<ffi::AnyBuffer>(3 * t + 2);
      if (tb.has_error() || ib.has_error() || sb.has_error())
        return ffi::Error::InvalidArgument(who + "operands and results must be arrays");
      if (rets != nullptr) {
        auto ob = rets->get<ffi::AnyBuffer>(t);
        if (ob.has_error())
          return ffi::Error::InvalidArgument(who + "operands and results must be arrays");
        outs.push_back(**ob);
      } else {
        outs.push_back(*concat);
      }
      tables.push_back(*tb);
      indices.push_back(*ib);
      segs.push_back(*sb);
      const std::string tn = "table " + std::to_string(t) + ": ";
      if (tables[t].dimensions().size() == 2)
        column[t + 1] = column[t] + tables[t].dimensions()[1];
      if (concat == nullptr) {
        if (auto e = CheckTableAndResult(tables[t], outs[t]); e.failure())
          return ffi::Error::InvalidArgument(who + tn + e.message());
      } else if (auto e = CheckConcatTable(tables[t], *concat); e.failure()) {
        return ffi::Error::InvalidArgument(who + tn + e.message());
      }
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

    if (concat != nullptr && (concat->dimensions().size() != 2 ||
                              concat->dimensions()[1] != column[k]))
      return ffi::Error::InvalidArgument(
          who + "the result must be [rows, " + std::to_string(column[k]) +
          "] (the sum of the tables' D)");
#ifdef EMBER_TRACE_CALLS
    const auto t0 = EMBER_NOW();
#endif
    std::vector<Plan*> plans(k);
    for (size_t t = 0; t < k; ++t)
      plans[t] = &ScratchPlanAt(t, indices[t].dimensions()[0], outs[t].dimensions()[0]);
    // Plans are independent: build them in parallel (one part per table). Everything that can
    // fail was checked above; an exception (out of memory) is caught here, never left to
    // escape on one of XLA's threads.
    // Small work builds them on this thread: waking helpers costs more than the plans.
    int64_t lookups = 0;
    for (size_t t = 0; t < k; ++t) lookups += indices[t].dimensions()[0];
    std::vector<std::string> errors(k);
    auto build = [&](int64_t t) {
      try {
        if (auto e = BuildSegmentPlan(indices[t], segs[t], tables[t].dimensions()[0], opt,
                                      false, plans[t]);
            e.failure())
          errors[t] = e.message();
      } catch (const std::exception& ex) {
        errors[t] = ex.what();
      }
    };
    if (lookups < kParallelPlanLookups) {
      for (size_t t = 0; t < k; ++t) build(static_cast<int64_t>(t));
    } else {
      PoolRun(static_cast<int64_t>(k), build);
    }
    for (size_t t = 0; t < k; ++t)
      if (!errors[t].empty())
        return ffi::Error::InvalidArgument(who + "table " + std::to_string(t) + ": " + errors[t]);

    if (concat != nullptr) AdviseOutput(concat->untyped_data(), concat->size_bytes());
    else
      for (auto& o : outs) AdviseOutput(o.untyped_data(), o.size_bytes());
    std::vector<GroupItem> items(k);
    for (size_t t = 0; t < k; ++t) {
      items[t] = GroupItem{&tables[t], plans[t], &outs[t]};
      if (concat != nullptr) {
        const size_t bytes = concat->element_type() == ffi::DataType::F32 ? 4 : 2;
        items[t].out_base = static_cast<char*>(concat->untyped_data()) + column[t] * bytes;
        items[t].out_stride = column[k];
      }
    }
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

ffi::Error GroupedSegmentReduceImpl(ffi::RemainingArgs args, ffi::RemainingRets rets,
                                    ffi::ThreadPool xla_pool, std::string_view combiner,
                                    std::string_view index_mode, bool wrap_negative,
                                    bool weighted, double init, int64_t index_bits) {
  XlaPoolScope pool_scope(&xla_pool);
  return Grouped(args, &rets, nullptr, combiner, index_mode, wrap_negative, weighted, init,
                 index_bits);
}

ffi::Error GroupedConcatImpl(ffi::RemainingArgs args, ffi::Result<ffi::AnyBuffer> out,
                             ffi::ThreadPool xla_pool, std::string_view combiner,
                             std::string_view index_mode, bool wrap_negative, bool weighted,
                             double init, int64_t index_bits) {
  XlaPoolScope pool_scope(&xla_pool);
  return Grouped(args, nullptr, &*out, combiner, index_mode, wrap_negative, weighted, init,
                 index_bits);
}

}  // namespace
}  // namespace ember

EMBER_HANDLER(EmberGroupedSegmentReduceConcat, ember::GroupedConcatImpl,
              EMBER_BIND_ATTRS(xla::ffi::Ffi::Bind()
                                   .RemainingArgs()
                                   .Ret<xla::ffi::AnyBuffer>()
                                   .Ctx<xla::ffi::ThreadPool>()));

EMBER_HANDLER(EmberGroupedSegmentReduce, ember::GroupedSegmentReduceImpl,
              EMBER_BIND_ATTRS(xla::ffi::Ffi::Bind()
                                   .RemainingArgs()
                                   .RemainingRets()
                                   .Ctx<xla::ffi::ThreadPool>()));
