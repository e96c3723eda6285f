"""``ember.padded_bag``: fixed-size bags ``table[ids]`` of shape [B,P,D] reduced over P by a
``reduce`` (jnp.sum/max/mean(axis=1), Keras Embedding + reduce_sum/mean, flax Embed), with
optional per-lookup weights or a 0/1 padding mask multiplied in."""

from __future__ import annotations

from ember_xla.custom_calls import PADDED_BAG
from ember_xla.ir.operation import Operation
from ember_xla.rewrites.cluster import Cluster
from ember_xla.rewrites.matcher import Pattern
from ember_xla.rewrites.patterns.common import (
    combiner_name,
    lookup_of,
    make_cluster,
    split_weighted,
)
from ember_xla.rewrites.refs import Ref, binary_combiner, scalar_constant
from ember_xla.rewrites.walk import NoMatch, Walk


class PaddedBag(Pattern):
    name = PADDED_BAG.name
    kind = "padded_bag"
    roots = ("reduce",)

    def __init__(self, xla_order: bool = True) -> None:
        #: True: the kernel adds a bag's rows in XLA:CPU's order (``sum_order``), and bags whose
        #: order is not reproduced stay in XLA. False (the DAE machines, whose programs add the
        #: rows one after the other and are compared with XLA to a tolerance): always
        #: "sequential".
        self.xla_order = xla_order

    def match(self, op: Operation) -> Cluster:
        if len(op.operands) != 2:
            raise NoMatch(f"variadic reduce with {len(op.operands)} operands")
        src = op.operands[0].type
        if src.rank != 3 or op.attributes.get("dimensions", []) != [1]:
            raise NoMatch(f"reduce of {src} over {op.attributes.get('dimensions')} is not a "
                          "[B,P,D] bag reduced over P")
        combiner = combiner_name(binary_combiner(op), f"reduce {op.name}")
        if combiner in ("max", "min"):
            # Measured (docs/RELIABILITY.md): XLA:CPU hands some of these reduces to YNNPACK,
            # whose max/min drop NaN operands, and others to its own emitter, which propagates
            # NaN; which one depends on shape and dtype (f32 [B,40,16]: YNNPACK, [B,4,8]: not;
            # bf16/f16 max: never, min: at the same shapes as f32). Equivalence with XLA is the
            # law and that choice is not ours to predict, so these bags stay in XLA.
            raise NoMatch(f"reduce {op.name} is a {combiner} bag: XLA:CPU's NaN handling for "
                          "max/min reduces depends on whether it offloads them to YNNPACK, so "
                          "the cluster stays in XLA")
        init = scalar_constant(Ref(op.operands[1]))
        if init is None:
            raise NoMatch(f"reduce {op.name} starts from a non-constant value")
        walk = Walk(op)
        b, p, _ = src.dims
        rows = Ref(op.operands[0])
        table_type = src.element_type
        if rows.op.opcode == "convert" and walk.can_take(rows):
            # jnp.sum / tf.reduce_sum of f16/bf16 rows: convert to f32, reduce in f32 (the
            # kernel accumulates in its output type); f32 -> f32 converts are no-ops
            table_type = rows.op.operands[0].type.element_type
            if table_type != src.element_type and not (
                    src.element_type == "f32" and table_type in ("f16", "bf16")):
                raise NoMatch(f"the bag is reduced in {src.element_type} after converting "
                              f"{table_type} rows; only f16/bf16 -> f32 is modelled")
            walk.take(rows)
            rows = Ref(rows.op.operands[0])
        rows, weights = split_weighted(walk, rows, b * p)
        lk = lookup_of(walk, rows)
        if lk.lookup_dims != (b, p):
            raise NoMatch(f"lookups {lk.lookup_dims} do not form the reduced [B,P]=[{b},{p}]")
        if lk.table.value.type.element_type != table_type:
            raise NoMatch("the reduction runs in a different type than the table")
        d = src.dims[2]
        order = (sum_order(b, p, d, src.element_type, combiner, weights is not None, init)
                 if self.xla_order else "sequential")
        cluster = make_cluster(self, walk, lk, [("ids", lk.indices)], weights, combiner, init)
        cluster.attrs["sum_order"] = order
        return cluster


#: XLA:CPU gives a reduce to YNNPACK when its operand or result has this many elements
#: (xla/backends/cpu/ynn_support.cc: IsInstructionPreferredByYnn).
YNN_MIN_ELEMENTS = 4096
#: XLA:CPU's tree-reduction rewriter splits a reduced dimension longer than this into windows.
TREE_WINDOW = 32
#: Weighted bags summed in f32 below the YNNPACK size: XLA:CPU's loop adds the rows one after
#: the other (f32 tables: with fused multiply-adds) up to 16 rows; from 17 rows on, rows near
#: the maximum overflow differently (bf16; f32 rounds differently from 20), so it is another
#: order (measured; RELIABILITY.md).
FMA_MAX_WIDTH = 17
#: From this bag width on, YNNPACK's order is not the blocked one (measured; RELIABILITY.md).
BLOCKED_MAX_WIDTH = 512


def sum_order(b: int, p: int, d: int, reduce_type: str, combiner: str, weighted: bool,
              init: float) -> str:
    """The order in which XLA:CPU adds a padded bag's P rows, as the kernel's ``sum_order``:
    "sequential", "sequential_fma" (weighted rows each added with a fused multiply-add, as
    XLA:CPU's fused multiply-reduce loop does) or "blocked" (native/blocked_sum.h); raises
    NoMatch where none is XLA's."""
    shape = f"[{b},{p},{d}] {reduce_type}"
    if reduce_type == "f32" and b * p * d >= YNN_MIN_ELEMENTS:
        # YNNPACK's reduce (sum over f32, or over bf16/f16 rows converted to f32)
        if weighted:
            raise NoMatch(f"weighted bag {shape}: XLA:CPU hands it to YNNPACK, whose order of "
                          "the multiply-adds is not reproduced, so the cluster stays in XLA")
        if combiner not in ("sum", "mean"):
            raise NoMatch(f"{combiner} bag {shape}: YNNPACK's blocked order is reproduced for "
                          "sum and mean only")
        if init != 0.0:
            raise NoMatch(f"bag {shape} starts at {init}: YNNPACK's blocked sum is reproduced "
                          "from 0 only")
        if p >= BLOCKED_MAX_WIDTH:
            raise NoMatch(f"bag {shape}: XLA:CPU's YNNPACK order for bags of {BLOCKED_MAX_WIDTH} "
                          "or more rows is not reproduced, so the cluster stays in XLA")
        return "blocked" if p > 4 else "sequential"
    if weighted and reduce_type == "f32" and p >= FMA_MAX_WIDTH:
        raise NoMatch(f"weighted bag {shape}: XLA:CPU's fused multiply-reduce loop adds "
                      f"bags of {FMA_MAX_WIDTH} or more rows in an order that is not "
                      "reproduced, so the cluster stays in XLA")
    if p > TREE_WINDOW:
        raise NoMatch(f"bag {shape}: XLA:CPU sums bags of more than {TREE_WINDOW} rows in "
                      f"windows of {TREE_WINDOW} (tree reduction), which is not reproduced, so "
                      "the cluster stays in XLA")
    return "sequential_fma" if weighted and reduce_type == "f32" else "sequential"
