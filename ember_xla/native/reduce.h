// Executes a Plan: reduces the looked-up table rows into each output row, in plan order.
#ifndef EMBER_XLA_NATIVE_REDUCE_H_
#define EMBER_XLA_NATIVE_REDUCE_H_

#include "plan.h"

namespace ember {

// `weights` is nullptr unless opt.weighted; it has T's type and is indexed by lookup j.
// Output rows are independent, so large problems are split by output rows over threads; the
// order within a row never changes, hence results do not depend on the thread count.
ffi::Error RunPlan(const ffi::AnyBuffer& table, const Plan& plan, const void* weights,
                   const Options& opt, ffi::AnyBuffer& out);

}  // namespace ember

#endif  // EMBER_XLA_NATIVE_REDUCE_H_
