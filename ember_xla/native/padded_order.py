"""The order in which XLA:CPU adds the rows of a padded bag (a ``reduce`` over the bag axis of
[B, P, D]), as the ``sum_order`` attribute of ``ember.padded_bag`` (native/blocked_sum.h):
measured against XLA:CPU (jax/jaxlib 0.10.2) and matched to its published thresholds
(docs/RELIABILITY.md, "The order of a padded bag's sum"). The rewrite keeps a bag whose order
is not reproduced in XLA; ``ember_xla.embedding_bag`` adds such a bag row after row."""

from __future__ import annotations


class OrderNotReproduced(Exception):
    """XLA:CPU adds this bag's rows in an order the kernel does not reproduce (the reason)."""


#: XLA:CPU gives a reduce to YNNPACK when its operand or result has this many elements
#: (xla/backends/cpu/ynn_support.cc: IsInstructionPreferredByYnn).
YNN_MIN_ELEMENTS = 4096
#: Below the YNNPACK size XLA:CPU's own loop adds a bag's rows one after the other up to this
#: many rows; from 25 on (measured at B <= 8, D <= 32) in another order.
SEQUENTIAL_MAX_WIDTH = 24
#: XLA:CPU's tree-reduction rewriter splits a reduced dimension longer than this into windows.
TREE_WINDOW = 32
#: Weighted bags summed in f32 below the YNNPACK size: XLA:CPU's loop adds the rows one after
#: the other (f32 tables: with fused multiply-adds) up to 15 rows; at 16 rows the order depends
#: on the loop's code (bf16 rows, s64 ids, D): rows near the maximum overflow differently in 20
#: of 20 random bags for some of them; from 17 rows on always (measured; RELIABILITY.md).
FMA_MAX_WIDTH = 16
#: From this bag width on, YNNPACK's order is not the blocked one (measured; RELIABILITY.md).
BLOCKED_MAX_WIDTH = 512


def xla_sum_order(b: int, p: int, d: int, reduce_type: str, combiner: str, weighted: bool,
              init: float) -> str:
    """The order in which XLA:CPU adds a padded bag's P rows, as the kernel's ``sum_order``:
    "sequential", "sequential_fma" (weighted rows each added with a fused multiply-add, as
    XLA:CPU's fused multiply-reduce loop does) or "blocked" (native/blocked_sum.h); raises
    OrderNotReproduced where none is XLA's."""
    shape = f"[{b},{p},{d}] {reduce_type}"
    kept = "so the cluster stays in XLA"
    if reduce_type == "f32" and b * p * d >= YNN_MIN_ELEMENTS:
        # YNNPACK's reduce (sum over f32, or over bf16/f16 rows converted to f32)
        if weighted:
            raise OrderNotReproduced(f"weighted bag {shape}: XLA:CPU hands it to YNNPACK, whose "
                                     f"order of the multiply-adds is not reproduced, {kept}")
        if combiner not in ("sum", "mean"):
            raise OrderNotReproduced(f"{combiner} bag {shape}: YNNPACK's blocked order is "
                                     "reproduced for sum and mean only")
        if init != 0.0:
            raise OrderNotReproduced(f"bag {shape} starts at {init}: YNNPACK's blocked sum is "
                                     "reproduced from 0 only")
        if p >= BLOCKED_MAX_WIDTH:
            raise OrderNotReproduced(f"bag {shape}: XLA:CPU's YNNPACK order for bags of "
                                     f"{BLOCKED_MAX_WIDTH} or more rows is not reproduced, {kept}")
        return "blocked" if p > 4 else "sequential"
    if weighted and reduce_type == "f32" and p >= FMA_MAX_WIDTH:
        raise OrderNotReproduced(f"weighted bag {shape}: XLA:CPU's fused multiply-reduce loop "
                                 f"adds bags of {FMA_MAX_WIDTH} or more rows in an order that "
                                 f"is not reproduced, {kept}")
    if p > SEQUENTIAL_MAX_WIDTH:
        raise OrderNotReproduced(f"bag {shape}: XLA:CPU's own reduce loop adds bags of more "
                                 f"than {SEQUENTIAL_MAX_WIDTH} rows in another order (from 25 "
                                 f"rows; windows of {TREE_WINDOW} past {TREE_WINDOW}), which is "
                                 f"not reproduced, {kept}")
    return "sequential_fma" if weighted and reduce_type == "f32" else "sequential"
