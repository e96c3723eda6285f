// Internal to the reduce loops (reduce.cc: the row kernels and RunPlan; reduce_group.cc: the
// grouped and multi-output runners): how work is cut into parallel parts, and a type-erased
// runner of one plan's output rows.
#ifndef EMBER_XLA_NATIVE_REDUCE_PARTS_H_
#define EMBER_XLA_NATIVE_REDUCE_PARTS_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "reduce.h"

namespace ember {

// The locality hint of the row prefetches of single-pass rows (rows read in several passes are
// always prefetched with prefetcht0, 3). prefetcht0 (3): on the AMD EPYC machines this runs on
// now (Zen 4, KVM; AVX-512, 1 MiB L2, 32 MiB L3) a loop summing 438k random 512-byte rows took
// 3.1 ms with prefetcht0 against 7.1 ms with prefetchnta (0) for a 10 MiB table (in L3), the
// same for a table in L2, and 11.4 vs 12.1 ms for a 100 MiB table (fastest of 9, one thread;
// prefetchnta had measured ~2x faster on the Zen 3 machines before; on a Zen 3 VM again later,
// the 26-table stage ran 3.01-3.16x XLA:CPU with prefetcht0 and 2.88-3.07x with prefetchnta:
// docs/BENCHMARKS.md). FBGEMM uses prefetcht0.
#ifndef EMBER_PREFETCH_LOCALITY
#define EMBER_PREFETCH_LOCALITY 3
#endif

// Below this many (lookups + rows) * D element-steps a call stays on one thread.
constexpr int64_t kParallelWork = 1 << 17;
// The same for a grouped call (RunGroupedPlans: one thread per this much work): its tables'
// rows come from many tables, mostly from memory, and a helper adds the wait for a part it
// holds when it is descheduled. The B=16 MLPerf stage (26 tables, D=128: 491,520
// element-steps) took 139-144 us at the minimum on one thread against 133-204 us on two, and
// 1.69-2.08x XLA:CPU against 1.26-1.81x by median (Zen 4 VM, load 5.5, alternating process
// pairs; B=32: 188 vs 187 us at the minimum; docs/BENCHMARKS.md), so up to ~1M element-steps
// (B=32 there) it stays on the calling thread.
constexpr int64_t kGroupedParallelWork = 1 << 19;
// Parts per thread: more, smaller parts let an idle thread take over from a descheduled one.
constexpr int64_t kPartsPerThread = 8;

// Part boundaries over output rows [0, rows): cut[t] is the first row whose cost(row) (the
// non-decreasing work before it, total = cost(rows)) reaches total * t / parts.
template <typename Cost>
std::vector<int64_t> BalancedCuts(int64_t rows, int64_t parts, int64_t total, const Cost& cost) {
  std::vector<int64_t> cut(static_cast<size_t>(parts) + 1, rows);
  cut[0] = 0;
  for (int64_t t = 1; t < parts; ++t) {
    int64_t lo = cut[t - 1], hi = rows;
    const int64_t goal = total * t / parts;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (cost(mid) < goal) lo = mid + 1; else hi = mid;
    }
    cut[t] = lo;
  }
  return cut;
}

// One table of a grouped call: runs rows [r0, r1) of its plan.
struct ItemRunner {
  std::vector<float> nan_storage;  // D NaNs of T's type (T is at most 4 bytes)
  std::function<void(int64_t, int64_t, unsigned)> run;
};

// The runner of item `it` (rows of its plan into its result, with its table's and result's
// types); `w` (nullptr: unweighted) are the weights, of type `wt`, as for RunPlan.
ffi::Error MakeItemRunner(const GroupItem& it, const Options& opt, ItemRunner* runner,
                          const void* w = nullptr, ffi::DataType wt = ffi::DataType::F32);

}  // namespace ember

#endif  // EMBER_XLA_NATIVE_REDUCE_PARTS_H_
