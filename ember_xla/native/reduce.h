// Executes a Plan: reduces the looked-up table rows into each output row, in plan order.
#ifndef EMBER_XLA_NATIVE_REDUCE_H_
#define EMBER_XLA_NATIVE_REDUCE_H_

#include "plan.h"

namespace ember {

// `weights` is nullptr unless opt.weighted; it is indexed by lookup j and has type `wtype`
// (T's type: the product is rounded to T; or, for an f32 result, f32: the product is computed
// in f32). The result has T's type or f32; every step is rounded to the result's type.
// Output rows are independent, so large problems are split by output rows over a small
// persistent thread pool; the order within a row never changes, hence results do not depend on
// the thread count.
ffi::Error RunPlan(const ffi::AnyBuffer& table, const Plan& plan, const void* weights,
                   ffi::DataType wtype, const Options& opt, ffi::AnyBuffer& out);

// Several unweighted plans (one per table, each with its own table and result) run as one
// parallel loop: the tables' output rows are laid end to end and cut into parts of equal
// (lookups + rows) * D cost, so a big table is split over threads and small tables are grouped
// into one part. Every output row is computed exactly as RunPlan computes it.
// out gives the result's element type; the rows are written at out_base (default: out's data)
// every out_stride elements (default: D), so several tables can fill one concatenated
// [rows, sum D] result side by side.
struct GroupItem {
  const ffi::AnyBuffer* table;
  const Plan* plan;
  ffi::AnyBuffer* out;
  void* out_base = nullptr;
  int64_t out_stride = 0;
};
ffi::Error RunGroupedPlans(const GroupItem* items, int64_t count, const Options& opt);

// One plan, several results (ember.multi_segment_reduce): outs[i] is exactly what
// RunPlan(table, plan, weights, wtype, opts[i], *outs[i]) writes (opts differ only in combiner
// and init). The output rows are taken in blocks whose looked-up rows fit in L2 (kMultiBlockBytes),
// and every result is reduced over a block before the next block starts: each table row is
// fetched from memory once and re-read from cache for the other results. One parallel loop.
ffi::Error RunMultiPlan(const ffi::AnyBuffer& table, const Plan& plan, const void* weights,
                        ffi::DataType wtype, const Options* opts, ffi::AnyBuffer* const* outs,
                        int64_t count);

}  // namespace ember

#endif  // EMBER_XLA_NATIVE_REDUCE_H_
