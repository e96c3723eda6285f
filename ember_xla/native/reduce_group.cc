// The runners of several plans in one parallel loop: RunGroupedPlans (k tables, one plan
// each: ember.grouped_segment_reduce[_concat]) and RunMultiPlan (one plan, several results:
// ember.multi_segment_reduce). Every output row is computed by the same row kernels as RunPlan.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "pages.h"
#include "pool.h"
#include "reduce.h"
#include "reduce_parts.h"
#include "table_pages.h"

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace ember {

ffi::Error RunGroupedPlans(const GroupItem* items, int64_t count, const Options& opt) {
  std::vector<ItemRunner> runners(static_cast<size_t>(count));
  // Global cost space: item i's row r starts at offset[i] + cost_i(r), where cost_i(r) =
  // (lookups before row r + r) * D_i.
  std::vector<int64_t> offset(static_cast<size_t>(count) + 1, 0);
  for (int64_t i = 0; i < count; ++i) {
    const GroupItem& it = items[i];
    AdviseTable(it.table->untyped_data(), it.table->size_bytes());
    if (auto e = MakeItemRunner(it, opt, &runners[i]); e.failure()) return e;
    const Plan& p = *it.plan;
    const int64_t d = std::max<int64_t>(1, it.table->dimensions()[1]);
    offset[i + 1] = offset[i] + (p.row_ptr[p.rows] - p.row_ptr[0] + p.rows) * d;
  }
  const int64_t total = offset[count];
  if (total == 0) return ffi::Error::Success();
#if defined(__SSE__)
  const unsigned csr = _mm_getcsr();
#else
  const unsigned csr = 0;
#endif
  const int64_t threads =
      std::min<int64_t>(PoolThreads(), std::max<int64_t>(1, total / kGroupedParallelWork));
  const int64_t parts = threads > 1 ? threads * kPartsPerThread : 1;
  // Part boundaries as (item, row): the first row whose global start is >= the goal.
  struct Cut { int64_t item, row; };
  std::vector<Cut> cut(static_cast<size_t>(parts) + 1);
  cut[0] = {0, 0};
  cut[parts] = {count, 0};
  for (int64_t t = 1; t < parts; ++t) {
    const int64_t goal = total * t / parts;
    // The item holding the goal: last i with offset[i] <= goal.
    int64_t i = static_cast<int64_t>(std::upper_bound(offset.begin(), offset.end(), goal) -
                                     offset.begin()) - 1;
    if (i >= count) { cut[t] = {count, 0}; continue; }
    const Plan& p = *items[i].plan;
    const int64_t d = std::max<int64_t>(1, items[i].table->dimensions()[1]);
    const int64_t base = p.row_ptr[0];
    int64_t lo = 0, hi = p.rows;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (offset[i] + (p.row_ptr[mid] - base + mid) * d < goal) lo = mid + 1; else hi = mid;
    }
    cut[t] = lo >= p.rows ? Cut{i + 1, 0} : Cut{i, lo};
    if (cut[t].item < cut[t - 1].item ||
        (cut[t].item == cut[t - 1].item && cut[t].row < cut[t - 1].row))
      cut[t] = cut[t - 1];
  }
  auto run_part = [&](int64_t p) {
    const Cut a = cut[p], b = cut[p + 1];
    for (int64_t i = a.item; i <= b.item && i < count; ++i) {
      const int64_t r0 = i == a.item ? a.row : 0;
      const int64_t r1 = i == b.item ? b.row : items[i].plan->rows;
      if (r0 < r1) runners[i].run(r0, r1, csr);
    }
  };
  if (parts == 1) run_part(0);
  else PoolRun(parts, run_part);
  return ffi::Error::Success();
}

namespace {
// Looked-up bytes per block of a multi-output call: well inside a core's L2 (512 KiB on the
// Zen 3 machines this is developed on), so the later results re-read the block's rows from it.
constexpr int64_t kMultiBlockBytes = int64_t{128} << 10;
}  // namespace

ffi::Error RunMultiPlan(const ffi::AnyBuffer& table, const Plan& plan, const void* weights,
                        ffi::DataType wtype, const Options* opts, ffi::AnyBuffer* const* outs,
                        int64_t count) {
  std::vector<ItemRunner> runners(static_cast<size_t>(count));
  AdviseTable(table.untyped_data(), table.size_bytes());
  for (int64_t i = 0; i < count; ++i) {
    AdviseOutput(outs[i]->untyped_data(), outs[i]->size_bytes());
    GroupItem it{&table, &plan, outs[i]};
    if (auto e = MakeItemRunner(it, opts[i], &runners[i], weights, wtype); e.failure())
      return e;
  }
  const int64_t rows = plan.rows;
  if (rows == 0 || count == 0) return ffi::Error::Success();
#if defined(__SSE__)
  const unsigned csr = _mm_getcsr();
#else
  const unsigned csr = 0;
#endif
  const int64_t d = std::max<int64_t>(1, table.dimensions()[1]);
  const int64_t* row_ptr = plan.row_ptr.data();
  const int64_t base = row_ptr[0];
  auto cost = [&](int64_t r) { return row_ptr[r] - base + r; };  // lookups + rows
  const int64_t total = cost(rows);
  const int64_t threads = std::min<int64_t>(
      PoolThreads(), std::max<int64_t>(1, total * d * count / kParallelWork));
  const int64_t parts = std::min<int64_t>(threads > 1 ? threads * kPartsPerThread : 1, rows);
  const std::vector<int64_t> cut = BalancedCuts(rows, parts, total, cost);
  const int64_t elem = table.element_type() == ffi::DataType::F32 ? 4 : 2;
  const int64_t block = std::max<int64_t>(1, kMultiBlockBytes / (d * elem));
  auto run_part = [&](int64_t p) {
    const int64_t end = cut[p + 1];
    for (int64_t r = cut[p]; r < end;) {
      // rows [r, e): as many as keep the block's lookups within `block` (at least one row)
      const int64_t* last = std::upper_bound(row_ptr + r + 1, row_ptr + end + 1,
                                             row_ptr[r] + block);
      const int64_t e = std::max<int64_t>(r + 1, (last - row_ptr) - 1);
      for (int64_t i = 0; i < count; ++i) runners[i].run(r, e, csr);
      r = e;
    }
  };
  if (parts <= 1) run_part(0);
  else PoolRun(parts, run_part);
  return ffi::Error::Success();
}

}  // namespace ember
