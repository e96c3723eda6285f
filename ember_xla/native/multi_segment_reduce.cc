// ember.multi_segment_reduce: one lookup feeding several segment reductions, in one call.
// Operands T[N,D], indices[L], segment_ids[L] (+ weights[L]): exactly ember.segment_reduce's
// operands; results a tuple of k >= 1 arrays out_i[S,D] (each T's type or f32; all of one type
// when weighted). Attributes: combiners (string, k comma-separated names: "sum,max"), inits
// (string, k comma-separated f64 values as Python's repr prints them: "0.0,-inf"), index_mode,
// wrap_negative, weighted, index_bits.
// out_i is bit for bit ember.segment_reduce(T, indices, segment_ids[, weights]) with combiner i
// and init i;
// the plan is built once and the rows are read once per block of output rows (reduce.h,
// RunMultiPlan).
#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

#include "handler.h"
#include "pool.h"
#include "reduce.h"

namespace ember {
namespace {

std::vector<std::string> SplitCommas(std::string_view s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t comma = s.find(',', start);
    out.emplace_back(s.substr(start, comma == std::string_view::npos ? s.size() - start
                                                                      : comma - start));
    if (comma == std::string_view::npos) return out;
    start = comma + 1;
  }
}

// A whole decimal/inf/nan literal (strtod's syntax, which repr(float) always satisfies).
bool ParseDouble(const std::string& s, double* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && errno != ERANGE;
}

ffi::Error MultiSegmentReduceImpl(ffi::AnyBuffer table, ffi::AnyBuffer indices,
                                  ffi::AnyBuffer segment_ids, ffi::RemainingArgs rest,
                                  ffi::RemainingRets rets, ffi::ThreadPool xla_pool,
                                  std::string_view combiners, std::string_view inits,
                                  std::string_view index_mode, bool wrap_negative,
                                  bool weighted, int64_t index_bits) {
  XlaPoolScope pool_scope(&xla_pool);
  return Guarded("multi_segment_reduce", [&]() -> ffi::Error {
    const std::string who = "ember.multi_segment_reduce: ";
    const std::vector<std::string> names = SplitCommas(combiners);
    const std::vector<std::string> starts = SplitCommas(inits);
    const size_t k = rets.size();
    if (k == 0 || names.size() != k || starts.size() != k)
      return ffi::Error::InvalidArgument(
          who + std::to_string(k) + " results need as many combiners and inits; got '" +
          std::string(combiners) + "' and '" + std::string(inits) + "'");
    std::vector<Options> opts(k);
    std::vector<ffi::AnyBuffer> outs;
    std::vector<ffi::AnyBuffer*> out_ptrs(k);
    for (size_t i = 0; i < k; ++i) {
      double init = 0.0;
      if (!ParseDouble(starts[i], &init))
        return ffi::Error::InvalidArgument(who + "init " + std::to_string(i) + " '" +
                                           starts[i] + "' is not a number");
      if (auto e = ParseOptions(names[i], index_mode, wrap_negative, weighted, init, index_bits,
                                &opts[i]);
          e.failure())
        return ffi::Error::InvalidArgument(who + "result " + std::to_string(i) + ": " +
                                           e.message());
      auto ob = rets.get<ffi::AnyBuffer>(i);
      if (ob.has_error()) return ffi::Error::InvalidArgument(who + "results must be arrays");
      outs.push_back(**ob);
    }
    for (size_t i = 0; i < k; ++i) {
      out_ptrs[i] = &outs[i];
      if (auto e = CheckTableAndResult(table, outs[i]); e.failure())
        return ffi::Error::InvalidArgument(who + "result " + std::to_string(i) + ": " +
                                           e.message());
      if (outs[i].dimensions()[0] != outs[0].dimensions()[0])
        return ffi::Error::InvalidArgument(who + "every result must have the same rows");
      if (weighted && outs[i].element_type() != outs[0].element_type())
        return ffi::Error::InvalidArgument(who + "weighted results must all have one type");
    }
    if (indices.dimensions().size() != 1 || segment_ids.dimensions().size() != 1)
      return ffi::Error::InvalidArgument(who + "indices and segment_ids must have rank 1");
    if (indices.dimensions()[0] != segment_ids.dimensions()[0])
      return ffi::Error::InvalidArgument(
          who + "indices has " + std::to_string(indices.dimensions()[0]) +
          " elements but segment_ids has " + std::to_string(segment_ids.dimensions()[0]));
    for (const ffi::AnyBuffer* b : {&indices, &segment_ids})
      if (b->element_type() != ffi::DataType::S32 && b->element_type() != ffi::DataType::S64)
        return ffi::Error::InvalidArgument(who + "indices and segment_ids must be s32 or s64");

    const void* weights = nullptr;
    ffi::DataType wtype;
    if (auto e = GetWeights(rest, opts[0], table, outs[0], indices, &weights, &wtype);
        e.failure())
      return ffi::Error::InvalidArgument(who + e.message());

    Plan& plan = ScratchPlan(indices.dimensions()[0], outs[0].dimensions()[0]);
    if (auto e = BuildSegmentPlan(indices, segment_ids, table.dimensions()[0], opts[0],
                                  weights != nullptr, &plan);
        e.failure())
      return ffi::Error::InvalidArgument(who + e.message());
    return RunMultiPlan(table, plan, weights, wtype, opts.data(), out_ptrs.data(),
                        static_cast<int64_t>(k));
  });
}

}  // namespace
}  // namespace ember

EMBER_HANDLER(EmberMultiSegmentReduce, ember::MultiSegmentReduceImpl,
              EMBER_ARRAYS_3.RemainingArgs()
                  .RemainingRets()
                  .Ctx<xla::ffi::ThreadPool>()
                  .Attr<std::string_view>("combiners")
                  .Attr<std::string_view>("inits")
                  .Attr<std::string_view>("index_mode")
                  .Attr<bool>("wrap_negative")
                  .Attr<bool>("weighted")
                  .Attr<int64_t>("index_bits"));
