"""``masked-bag-to-segments``: a padded bag whose padding is masked out with a ``select``
before the reduction over the bag axis -- ``jnp.where(mask[..., None], rows, 0).sum(1)``,
``jnp.where(mask, rows, -inf).max(1)``, Keras' mask propagation into
``GlobalAveragePooling1D`` (``SelectV2``), the out-of-range zeros of a one-hot lookup -- into
a segment reduction in which the masked-out lookups carry an out-of-range segment id:

    reduce(select(m, gather(T, ids), c), dims={1})             [B,P,D] -> [B,D]
    (the gather possibly inside jnp.take's fill select: rebuilt for the flat ids)
 => scatter(broadcast(c), select(m[:, :, 0], iota_B, B), gather(T, flat ids))

Rows scaled before the reduction, ``select(m, rows, 0) * w`` with ``w`` one finite constant
per lookup (e.g. ``* sqrt(D)``), keep their weights; with weights not provably finite the
pass refuses (a masked-out lookup adds ``0*w``, NaN for an Inf/NaN ``w``).

Exact when ``c`` is the combiner's identity (0 for add, -inf for max, +inf for min): a
masked-out lookup then adds nothing (``x + 0 = x`` for the sum, whose accumulator starts at +0
and so is never -0; ``max(x, -inf) = x``), and ``scatter`` drops out-of-range ids, which is
also what ``ember.segment_reduce`` does. Unlike rewriting the mask into a multiply, this stays
exact for tables holding Inf/NaN. The mask must be provably the same along the row dim D.

The same for a segment reduction whose rows are masked before the scatter -- ``jnp.take(...,
mode='fill', fill_value=0)`` (or ``jnp.where(m[:, None], rows, 0)``) + ``segment_sum``:

    scatter(broadcast(+0), seg, select(m, gather(T, ids), 0))        [L,D] -> [S,D]
 => scatter(broadcast(+0), select(m[:, 0], seg, S), gather(T, ids))

exact for the same reason (the accumulator starts at +0, so adding a +-0 row changes nothing);
the scatter's order of rows is kept, so no order rule is asked.

The segment form adds a bag's rows one after the other. With ``xla_order`` (the CPU rewrite,
compared bit for bit with XLA:CPU) a bag that XLA:CPU adds in another order
(``native/padded_order.sum_order`` of the reduce: YNNPACK's blocked order at most real sizes)
is left as it is: an unweighted sum in an order the padded-bag kernel reproduces goes to
``ember.padded_bag`` with the mask as an operand (patterns/padded_bag.py), the others stay in
XLA with the reason. The DAE machines (``xla_order=false``), whose programs add rows in order
and are compared to a tolerance, take every masked bag.
"""

from __future__ import annotations

import dataclasses
import math

from ember_xla.custom_calls import SUM_ORDERS
from ember_xla.hlo.shape import Shape
from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import register_pass
from ember_xla.ir.rewriter import PatternRewriter, RewritePattern
from ember_xla.native.padded_order import (
    BagSum,
    OrderNotReproduced,
    sum_order,
    ynn_reduces,
)
from ember_xla.rewrites.canonicalize.base import PatternPass
from ember_xla.rewrites.canonicalize.build import Emit, constant_along_last
from ember_xla.rewrites.canonicalize.lookups import RowLookup, lookup_ids, relookup, row_lookup
from ember_xla.rewrites.canonicalize.notes import note
from ember_xla.rewrites.lookup import index_chain, loop_index_type
from ember_xla.rewrites.patterns.forward_lookup import depends_on, forward_gather
from ember_xla.rewrites.reduce_merge import fused_by_xla, merged_by_xla
from ember_xla.rewrites.refs import Ref, binary_combiner, plus_zero, scalar_constant
from ember_xla.rewrites.walk import NoMatch, Walk

PASS = "masked-bag-to-segments"
_IDENTITY = {"add": 0.0, "maximum": -math.inf, "minimum": math.inf}
#: Orders in which ``ember.padded_bag`` sums a masked bag (patterns/padded_bag.py).
_MASKED_KERNEL_ORDERS = ("blocked", "vector8", "tree32")


def _ids(lk: RowLookup) -> tuple[bool, str]:
    """Whether the gather's ids come from the negative-id wrap ``select(i < 0, i + N, i)``
    (which XLA:CPU's loop computes with the bag), and the type of the ids the loop computes
    on (before jnp.take's s64 -> s32 convert), as the lookup matcher walks them."""
    try:
        _, wrap, _ = index_chain(Walk(lk.gather), Ref(lk.gather.operands[1]),
                                 lk.gather.operands[0].type.dims[0])
    except NoMatch:
        wrap = False
    return wrap, loop_index_type(lk.gather.operands[1])


def _xla_order(dt: str, b: int, p: int, d: int, weighted: bool, lk: RowLookup) -> str:
    """The order XLA:CPU adds the rows of the masked bag's reduce in (the padded bag's rule,
    for the ids as the module wraps them or not), or why it is not reproduced."""
    mode = "clip" if lk.fill_and is None else "fill"
    wraps, index_type = _ids(lk)
    try:
        return sum_order(BagSum(b, p, d, dt, "sum", 0.0, weighted, dt, index_type, mode,
                                wraps, masked=True))
    except OrderNotReproduced as e:
        return str(e)


class MaskedBag(RewritePattern):
    def __init__(self, xla_order: bool = True) -> None:
        self.xla_order = xla_order

    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode != "reduce" or len(op.operands) != 2:
            return
        x = op.operands[0]
        if x.type.rank != 3 or op.attributes.get("dimensions", []) != [1]:
            return
        sel, weights = x.owner, None
        if sel.opcode == "multiply" and len(x.uses) == 1:
            for v, w in ((sel.operands[0], sel.operands[1]), (sel.operands[1], sel.operands[0])):
                if v.owner.opcode == "select" and len(v.uses) == 1:
                    sel, weights = v.owner, w
                    break
            else:
                return
        if sel.opcode != "select" or len(sel.result.uses) != 1:
            return
        if row_lookup(sel.result) is not None:
            return  # jnp.take's out-of-bounds fill itself, which the lookup matcher models
        m, a, b = sel.operands
        lk, fill, negate = row_lookup(a), b, False
        if lk is None:
            lk, fill, negate = row_lookup(b), a, True
        if lk is None:
            return
        comb = binary_combiner(op)
        c = scalar_constant(Ref(fill))
        init = scalar_constant(Ref(op.operands[1]))
        ident = _IDENTITY.get(comb or "")
        where = f"masked bag {op.name}"
        if c is not None and math.isnan(c):
            return  # jnp.take's out-of-bounds fill, which the lookup matcher models
        if ident is None:
            note(PASS, op, f"{where} combines with {comb or 'a non-trivial computation'}")
            return
        if comb in ("maximum", "minimum"):
            # the bag is a reduce: XLA:CPU may offload it to YNNPACK, whose max/min drop NaN,
            # while a segment reduction propagates NaN (docs/RELIABILITY.md): not equivalent
            note(PASS, op, f"{where} is a {comb} bag: XLA:CPU's NaN handling for max/min "
                           "reduces depends on whether it offloads them to YNNPACK, so the "
                           "cluster stays in XLA")
            return
        if c is None or init is None or c != ident or init != ident:
            note(PASS, op, f"{where}: the masked-out value {c} and the init {init} are not the "
                           f"identity {ident} of {comb}, so masked lookups are not no-ops")
            return
        if not constant_along_last(m):
            note(PASS, op, f"{where}: the mask {m.owner.name} may differ along the row dim")
            return
        if weights is not None:
            wv = scalar_constant(Ref(weights))
            if comb != "add" or not constant_along_last(weights):
                note(PASS, op, f"{where}: masked rows times {weights.owner.name}, which is not "
                               "one weight per lookup of a sum")
                return
            if wv is None or not math.isfinite(wv):
                note(PASS, op, f"{where}: masked rows times weights {weights.owner.name} not "
                               "provably finite (a masked-out lookup adds 0*w, NaN for an "
                               "Inf/NaN weight, which dropping it would not reproduce)")
                return
        bsz, p, d = x.type.dims
        if lk.lead != (bsz, p):
            return
        merged = merged_by_xla(op) if self.xla_order else None
        if merged:
            note(PASS, op, f"{where}: {merged}")
            return
        if self.xla_order:
            order = _xla_order(x.type.element_type, bsz, p, d, weights is not None, lk)
            if order in _MASKED_KERNEL_ORDERS and weights is None and not negate \
                    and comb == "add":
                return  # the padded bag's masked kernel adds the rows in that order
            if order != "sequential":
                why = (f"in the order {order!r}" if order in SUM_ORDERS else
                       f"in another order ({order})")
                note(PASS, op, f"{where}: XLA:CPU adds its {p} rows per bag {why}, not one "
                               "after the other as the segment form does, so the cluster "
                               "stays in XLA")
                return
            fused = (None if x.type.element_type == "f32" and ynn_reduces(bsz * p * d)
                     else fused_by_xla(op))
            if fused:
                note(PASS, op, f"{where}: {fused}")
                return
        n_l = bsz * p
        emit = Emit(rw, op)
        rows2 = relookup(emit, lk, emit.reshape(lookup_ids(emit, lk), (n_l,)))   # [L,D]
        if weights is not None:  # one finite weight per lookup: the weighted-bag form
            w = emit.reshape(emit.first_along_last(weights), (n_l,))
            wb = emit.broadcast(w, (n_l, d), [0])
            rows2 = emit.op("multiply", [rows2, wb], rows2.type)
        keep = emit.first_along_last(m)                               # [B,P]
        if negate:
            keep = emit.op("not", [keep], keep.type)
        iota = emit.op("iota", [], Shape.array("s32", (bsz, p)), {"dimensions": [0]})
        seg = emit.op("select", [keep, iota, emit.splat(bsz, "s32", (bsz, p))],
                      Shape.array("s32", (bsz, p)), name="bag.segment_ids")
        seg = emit.reshape(seg, (n_l, 1))
        base = emit.broadcast(op.operands[1], (bsz, d), [])
        scatter = emit.op("scatter", [base, seg, rows2], Shape.array(x.type.element_type,
                                                                    (bsz, d)), {
            "scatter_dimension_numbers": {"update_window_dims": [1], "inserted_window_dims": [0],
                                          "scatter_dims_to_operand_dims": [0],
                                          "index_vector_dim": 1},
            "indices_are_sorted": False}, callees=list(op.callees), name=op.name)
        if "metadata" in op.attributes:
            scatter.owner.attributes["metadata"] = dict(op.attributes["metadata"])
        rw.replace_op(op, scatter)


class MaskedSegments(RewritePattern):
    """``scatter(+0, seg, select(m, rows, 0))`` add, m constant along D, rows a row lookup
    -> ``scatter(+0, select(m, seg, S), rows)``: masked lookups dropped (module docstring)."""

    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode != "scatter" or len(op.operands) != 3 or binary_combiner(op) != "add":
            return
        base, seg, x = op.operands
        sel = x.owner
        if (x.type.rank != 2 or sel.opcode != "select" or len(x.uses) != 1
                or op.result.type.rank != 2 or row_lookup(x) is not None):
            return  # not masked rows (or jnp.take's NaN fill, which the lookup matcher models)
        dn = op.attributes.get("scatter_dimension_numbers", {})
        n_l, d = x.type.dims
        if (dn.get("update_window_dims") != [1] or dn.get("inserted_window_dims") != [0]
                or dn.get("scatter_dims_to_operand_dims") != [0] or seg.type.size != n_l
                or op.result.type.dims[1] != d or base.owner.opcode != "broadcast"):
            return
        m, a, b = sel.operands
        lk, fill, negate = row_lookup(a), b, False
        if lk is None:
            lk, fill, negate = row_lookup(b), a, True
        if lk is None or lk.value.type.dims != x.type.dims:
            return
        fwd = forward_gather(seg, tuple(op.result.type.dims))
        if fwd is not None and not depends_on(fwd.operands[0], op):
            return  # a lookup's gradient (the transpose of a segment sum): scatter_grad's
        where = f"masked segment rows {sel.name} of scatter {op.name}"
        c = scalar_constant(Ref(fill))
        if c is None or c != 0.0 or not plus_zero(Ref(base)):
            note(PASS, op, f"{where}: the masked-out value {c} or the init is not 0 from a +0 "
                           "sum, so masked lookups are not no-ops")
            return
        if not constant_along_last(m):
            note(PASS, op, f"{where}: the mask {m.owner.name} may differ along the row dim")
            return
        emit = Emit(rw, op)
        keep = emit.first_along_last(m)                                 # [L]
        if negate:
            keep = emit.op("not", [keep], keep.type)
        n_seg = op.result.type.dims[0]
        flat = emit.reshape(seg, (n_l,))
        et = seg.type.element_type
        dropped = emit.op("select", [keep, flat, emit.splat(n_seg, et, (n_l,))],
                          Shape.array(et, (n_l,)), name="masked.segment_ids")
        new = op.clone([base, emit.reshape(dropped, tuple(seg.type.dims)), lk.value])
        rw.insert_before(op, new)
        rw.replace_op(op, new.result)


@register_pass
@dataclasses.dataclass(frozen=True)
class MaskedBagPass(PatternPass):
    name = PASS
    xla_order: bool = True

    def patterns(self) -> list[RewritePattern]:
        return [MaskedBag(self.xla_order), MaskedSegments()]
