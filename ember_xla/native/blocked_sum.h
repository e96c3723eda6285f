// The summation order XLA:CPU uses for large padded sum/mean bags, reproduced bit for bit.
//
// XLA:CPU hands a reduce whose operand or result has at least 4096 elements to YNNPACK
// (xla/backends/cpu/ynn_support.cc, IsInstructionPreferredByYnn). For an f32 sum over the bag
// axis of [B, P, D] YNNPACK does not add the P rows one after the other: it sums blocks of 4
// consecutive rows (each from zero), adds the block sums in groups of 4 (16 rows), those in
// groups of 16 (256 rows), and those in order. Measured against XLA:CPU (jax/jaxlib 0.10.2) for
// 16 <= P <= 511, both settings of xla_allow_excess_precision; from P = 512 on it is something
// else (the rewrite keeps such bags in XLA). docs/RELIABILITY.md has the measurements.
#ifndef EMBER_XLA_NATIVE_BLOCKED_SUM_H_
#define EMBER_XLA_NATIVE_BLOCKED_SUM_H_

#include "plan.h"

namespace ember {

// Unweighted sum or mean (times 1 / P) bags of a padded [B, P] plan (plan.src resolved, row_ptr
// b * P), accumulated in f32 in the blocked order above; the result is f32 (tables f32, bf16
// or f16, converted exactly) and opt.init must be 0. Weighted sum bags (opt.weighted;
// `weights` [B, P] of `weights_type`) for f16 tables and weights -- XLA:CPU rounds each product
// to f16 in a loop fusion and gives YNNPACK the reduce of the converted products -- and f32
// tables and weights (rows scaled by one number: the rounded f32 products, in that order).
ffi::Error RunBlockedPaddedSum(const ffi::AnyBuffer& table, const void* weights,
                               ffi::DataType weights_type, const Plan& plan, int64_t bags,
                               int64_t width, const Options& opt, ffi::AnyBuffer& out);

}  // namespace ember

#endif  // EMBER_XLA_NATIVE_BLOCKED_SUM_H_
