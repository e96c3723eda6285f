// The summation orders of XLA:CPU's own loops for small padded sum/mean bags (a reduce over the
// bag axis of [B, P, D] below YNNPACK's 4096 elements), reproduced bit for bit.
//
// "vector8" (25 <= P <= 32): the reduce stays one loop fusion, and LLVM vectorizes its loop over
// the P rows as a reduction: 8 partial sums (row p into partial p mod 8, each from zero) over
// the first P - P mod 8 rows, folded in halves (partial j + partial j+4, then j+2, then j+1),
// then the remaining rows added in order. Measured on XLA:CPU (jax/jaxlib 0.10.2, AVX-512
// and AVX2-only hosts, 256-bit vectors); up to 24 rows the loop adds the rows in order.
//
// "tree32" (P > 32): XLA's TreeReductionRewriter (xla/hlo/transforms/simplifiers/
// tree_reduction_rewriter.cc) first reduces windows of 32 rows with stride 32 and kSame padding
// (ceil(P / 32) windows; floor(pad / 2) padding rows before the first row, the rest after the
// last), each window summed in order from zero, then adds the window sums in order.
#ifndef EMBER_XLA_NATIVE_WINDOW_SUM_H_
#define EMBER_XLA_NATIVE_WINDOW_SUM_H_

#include "plan.h"

namespace ember {

enum class WindowOrder { kVector8, kTree32 };

// Unweighted sum or mean (times 1 / P) bags of a padded [B, P] plan (plan.src resolved), in
// f32 in `order`; the result is f32 (tables f32, bf16 or f16, converted exactly), opt.init 0.
ffi::Error RunWindowedPaddedSum(const ffi::AnyBuffer& table, const Plan& plan, int64_t bags,
                                int64_t width, WindowOrder order, const Options& opt,
                                ffi::AnyBuffer& out);

}  // namespace ember

#endif  // EMBER_XLA_NATIVE_WINDOW_SUM_H_
