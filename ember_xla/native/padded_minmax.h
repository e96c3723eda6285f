// Padded max/min bags with XLA:CPU's semantics, bit for bit (NaN payload and sign, signed
// zeros, denormals): the two ways XLA:CPU computes a `reduce` max/min over the bag axis of
// [B, P, D] f32 rows, measured against jax/jaxlib 0.10.2 (docs/RELIABILITY.md, "Max and min
// bags"; the rule that picks one is native/padded_order.py: minmax_order).
//
// kReduceLoop (XLA's own reduce loop, below 4096 elements): acc = init, then for each row
// acc = op(acc, v): a NaN acc stays; else a NaN v is the result with its sign bit ANDed (max)
// or ORed (min) with acc's; else equal values give the AND (max) / OR (min) of their bits (so
// max(-0, +0) = +0, min = -0); else the larger (smaller). An out-of-range lookup of
// jnp.take's fill mode makes acc the NaN (LLVM folds the op with the fill's NaN constant to
// that NaN), whatever acc was.
//
// kYnnGroups4 (YNNPACK, from 4096 elements): the bag's rows in tiles of floor(32768 / D)
// rows, each tile's rows in groups of 4 (a tile's short last group repeats its first row),
// each group folded acc = vmaxps(acc, next) from its first row, then C = vmaxps(acc, C) from
// C = init; vmaxps(a, b) = a > b ? a : b (vminps alike), so NaN rows are dropped (an all-NaN
// bag gives init) and ties keep b.
//
// Both read every row value with the denormals-are-zero of the caller's MXCSR (XLA runs with
// DAZ: a denormal is the signed zero), NaNs unchanged (signalling ones too).
#ifndef EMBER_XLA_NATIVE_PADDED_MINMAX_H_
#define EMBER_XLA_NATIVE_PADDED_MINMAX_H_

#include "plan.h"

namespace ember {

enum class MinMaxOrder { kReduceLoop, kYnnGroups4 };

// Unweighted max/min (opt.combiner) bags of a padded [B, P] plan (plan.src resolved: a row,
// or -1 for fill mode's all-NaN row), f32 table and result, starting from opt.init.
ffi::Error RunPaddedMinMax(const ffi::AnyBuffer& table, const Plan& plan, int64_t bags,
                           int64_t width, const Options& opt, MinMaxOrder order,
                           ffi::AnyBuffer& out);

}  // namespace ember

#endif  // EMBER_XLA_NATIVE_PADDED_MINMAX_H_
