// Internal to the padded sums in XLA:CPU's orders (blocked_sum.cc, window_sum.cc): the table
// type dispatch and the cut of a call's bags into parallel parts that they share.
#ifndef EMBER_XLA_NATIVE_PADDED_PARTS_H_
#define EMBER_XLA_NATIVE_PADDED_PARTS_H_

#include <algorithm>
#include <cstdint>

#include "common.h"
#include "plan.h"
#include "pool.h"
#include "reduce_parts.h"

namespace ember {

// Calls run(T{}) with T the table's element type (float, bf16 or f16), or f32_as_bf16 for an
// f32 table whose rows are read as bf16 (`rows_bf16`).
template <typename Run>
ffi::Error WithTableType(ffi::DataType type, bool rows_bf16, const Run& run) {
  if (rows_bf16 && type != ffi::DataType::F32)
    return ffi::Error::InvalidArgument("ember.padded_bag: row_type=bf16 reads an f32 table");
  switch (type) {
    case ffi::DataType::F32:
      if (rows_bf16) run(f32_as_bf16{});
      else run(float{});
      break;
    case ffi::DataType::BF16: run(bf16{}); break;
    case ffi::DataType::F16: run(f16{}); break;
    default: return ffi::Error::InvalidArgument("ember.padded_bag: unsupported table type");
  }
  return ffi::Error::Success();
}

// Calls bags_fn(b0, b1) over consecutive ranges covering bags [0, bags) of `width` lookups of
// D values each: on this thread when the work is small (kParallelWork), else in parts over the
// pool (kPartsPerThread per thread).
template <typename BagsFn>
void RunBagParts(int64_t bags, int64_t width, int64_t d, const BagsFn& bags_fn) {
  const int64_t work = bags * (width + 1) * d;
  const int64_t threads = work < kParallelWork ? 1 : PoolThreads();
  // one thread: one part (more parts would still go through the pool, at ~6 us a call)
  const int64_t parts = threads <= 1 ? 1 : std::min<int64_t>(bags, threads * kPartsPerThread);
  if (parts <= 1) {
    bags_fn(int64_t{0}, bags);
    return;
  }
  PoolRun(parts, [&](int64_t part) { bags_fn(bags * part / parts, bags * (part + 1) / parts); });
}

}  // namespace ember

#endif  // EMBER_XLA_NATIVE_PADDED_PARTS_H_
