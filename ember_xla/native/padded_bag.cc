// ember.padded_bag: T[N,D], ids[B,P] (+ weights[B,P]) (+ mask pred[B,P]) -> [B,D]; bag b is
// ids[b, 0..P) in order, without the lookups whose mask is false (unweighted sums only: a
// masked-out lookup adds +0, which changes no sum started at +0). sum_order: the order (and,
// for max/min, the NaN and signed-zero semantics) of XLA:CPU's reduce (native/padded_order.py).
// row_type: "" (rows as stored) or "bf16" (an f32 table's values rounded to bf16 as they are
// read: XLA's gather of the converted table; unweighted bags, not the f32-only max/min
// orders reduce_loop and ynn_groups4).
#include "blocked_sum.h"
#include "handler.h"
#include "padded_minmax.h"
#include "pages.h"
#include "pool.h"
#include "reduce.h"
#include "table_pages.h"
#include "test_fault.h"
#include "window_sum.h"

namespace ember {
namespace {

ffi::Error PaddedBagImpl(ffi::AnyBuffer table, ffi::AnyBuffer ids, ffi::RemainingArgs rest,
                         ffi::Result<ffi::AnyBuffer> out, ffi::ThreadPool xla_pool,
                         std::string_view combiner,
                         std::string_view index_mode, bool wrap_negative, bool weighted,
                         double init, int64_t index_bits, std::string_view sum_order,
                         std::string_view row_type) {
  XlaPoolScope pool_scope(&xla_pool);
  return Guarded("padded_bag", [&]() -> ffi::Error {
    Options opt;
    if (auto e = ParseOptions(combiner, index_mode, wrap_negative, weighted, init,
                                   index_bits, &opt);
        e.failure())
      return e;
    if (opt.fill_zero)
      return ffi::Error::InvalidArgument(
          "ember.padded_bag: index_mode=zero is for segment reductions (a padded bag's zero "
          "fill is its mask operand)");
    if (sum_order != "sequential" && sum_order != "sequential_fma" && sum_order != "blocked" &&
        sum_order != "vector8" && sum_order != "tree32" && sum_order != "reduce_loop" &&
        sum_order != "ynn_groups4")
      return ffi::Error::InvalidArgument(
          "ember.padded_bag: sum_order must be sequential, sequential_fma, blocked, vector8, "
          "tree32, reduce_loop or ynn_groups4, not " + std::string(sum_order));
    if (row_type == "bf16") opt.rows_bf16 = true;
    else if (!row_type.empty())
      return ffi::Error::InvalidArgument(
          "ember.padded_bag: row_type must be \"\" (rows as stored) or bf16, not " +
          std::string(row_type));
    if (opt.rows_bf16 && (opt.weighted || sum_order == "reduce_loop" ||
                          sum_order == "ynn_groups4"))
      return ffi::Error::InvalidArgument(
          "ember.padded_bag: row_type=bf16 is for unweighted bags in a sum order");
    // XLA:CPU compiles for the host: it contracts the multiply and the add only where the CPU
    // has FMA, so the kernel does too
    opt.fused_multiply_add = sum_order == "sequential_fma" && CpuHasFma();
    if (auto e = CheckTableAndResult(table, *out, opt.rows_bf16); e.failure()) return e;
    if (ids.dimensions().size() != 2)
      return ffi::Error::InvalidArgument("ember.padded_bag: ids must have rank 2 [B, P]");
    const int64_t bags = ids.dimensions()[0], width = ids.dimensions()[1];
    if (out->dimensions()[0] != bags)
      return ffi::Error::InvalidArgument(
          "ember.padded_bag: result has " + std::to_string(out->dimensions()[0]) +
          " rows but ids has " + std::to_string(bags) + " bags");
    const bool* mask = nullptr;
    if (rest.size() > 0) {
      auto last = rest.get<ffi::AnyBuffer>(rest.size() - 1);
      if (last.has_value() && last->element_type() == ffi::DataType::PRED) {
        if (last->element_count() != ids.element_count() || last->dimensions().size() != 2 ||
            last->dimensions()[0] != bags)
          return ffi::Error::InvalidArgument(
              "ember.padded_bag: the mask must have the ids' shape [B, P]");
        if (opt.weighted || (opt.combiner != Combiner::kSum && opt.combiner != Combiner::kMean))
          return ffi::Error::InvalidArgument(
              "ember.padded_bag: a mask is for unweighted sum/mean bags");
        mask = static_cast<const bool*>(last->untyped_data());
        opt.masked = true;
      }
    }
    const void* weights = nullptr;
    ffi::DataType wtype;
    if (auto e = GetWeights(rest, opt, table, *out, ids, &weights, &wtype, mask ? 1 : 0);
        e.failure())
      return e;

    Plan& plan = ScratchPlan(ids.element_count(), bags);
    if (auto e = ResolveIndices(ids, table.dimensions()[0], opt, &plan.src); e.failure())
      return e;
    if (mask != nullptr)
      for (int64_t k = 0; k < bags * width; ++k)
        if (!mask[k]) plan.src[k] = kMaskedRow;
    plan.row_ptr.resize(bags + 1);
    for (int64_t b = 0; b <= bags; ++b) plan.row_ptr[b] = b * width;
    // RunPlan (the sequential orders) advises the table and result itself; the other orders
    // are advised here, once per call (a table is collapsed onto huge pages on its second
    // call, table_pages.h)
    if (sum_order == "sequential" || sum_order == "sequential_fma")
      return RunPlan(table, plan, weights, wtype, opt, *out);
    AdviseOutput(out->untyped_data(), out->size_bytes());
    AdviseTable(table.untyped_data(), table.size_bytes());
    // RunPlan injects the test fault itself; the other orders' kernels leave it to here
    auto run_order = [&]() -> ffi::Error {
      if (sum_order == "blocked")
        return RunBlockedPaddedSum(table, weights, wtype, plan, bags, width, opt, *out);
      if (sum_order == "reduce_loop" || sum_order == "ynn_groups4")
        return RunPaddedMinMax(
            table, plan, bags, width, opt,
            sum_order == "reduce_loop" ? MinMaxOrder::kReduceLoop : MinMaxOrder::kYnnGroups4,
            *out);
      // vector8 or tree32 (the orders were checked above)
      return RunWindowedPaddedSum(
          table, plan, bags, width,
          sum_order == "vector8" ? WindowOrder::kVector8 : WindowOrder::kTree32, opt, *out);
    };
    if (auto e = run_order(); e.failure()) return e;
    InjectTestFault(*out);
    return ffi::Error::Success();
  });
}

}  // namespace
}  // namespace ember

EMBER_HANDLER(EmberPaddedBag, ember::PaddedBagImpl,
              EMBER_REDUCTION_BINDING(EMBER_ARRAYS_2)
                  .Attr<std::string_view>("sum_order")
                  .Attr<std::string_view>("row_type"));
