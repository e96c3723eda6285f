"""``onehot-dot-to-gather``: a one-hot matmul / einsum lookup (``hk.Embed(lookup_style=
"ONE_HOT")``, ``jax.nn.one_hot(ids, N) @ table``, ``tf.einsum('bpv,vd->bpd', tf.one_hot(ids, N),
table)``) into ``select(0 <= ids < N, gather(table, ids), 0)``: the row for an id in range, 0
for any other id, as the one-hot product gives.

Exactness. The product for id k is ``1*T[k,:] + sum_{j!=k} 0*T[j,:]``. When every table entry
is finite that is ``T[k,:]`` (sums of a value and zeros are exact in any order; a ``-0.0``
entry may come out as ``+0.0``, which compares equal). When a table entry is ``Inf``/``NaN``,
``0*Inf = NaN`` poisons that column of *every* lookup in the product, which the gather does not
reproduce. So the pass rewrites only when the table is a constant whose entries are all finite,
or when the caller vouches for it (``assume_finite_tables=true``, CLI ``--assume_finite_tables``);
otherwise it leaves the dot and records a near-miss saying so.

Matched one-hot spellings (``O`` float ``[..., N]``): ``convert(P)`` or ``select(P, 1, 0)`` with
``P = compare(X, iota, EQ)`` (either operand order) where ``iota`` counts along the last dim
and ``X`` is the same for every index of the last dim (a broadcast of the ids); the ids are
``X[..., 0]``. The dot contracts O's last dim with the table's dim 0, no batch dims.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ember_xla.hlo.shape import Shape
from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import register_pass
from ember_xla.ir.rewriter import PatternRewriter, RewritePattern
from ember_xla.ir.value import Value
from ember_xla.rewrites.canonicalize.base import PatternPass
from ember_xla.rewrites.canonicalize.build import (
    Emit,
    constant_along_last,
    constant_array,
    iota_along_last,
)
from ember_xla.rewrites.canonicalize.lookups import row_gather
from ember_xla.rewrites.canonicalize.notes import note
from ember_xla.rewrites.refs import Ref, scalar_constant

PASS = "onehot-dot-to-gather"


def _one_hot_compare(o: Value) -> Operation | None:
    """The ``compare(.., EQ)`` a one-hot-looking ``o`` (convert(pred) / select(pred, 1, 0))
    is made of, or None."""
    op = o.owner
    if op.opcode == "convert" and op.operands[0].type.element_type == "pred":
        pred = op.operands[0]
    elif op.opcode == "select" and (scalar_constant(Ref(op.operands[1])) == 1.0
                                    and scalar_constant(Ref(op.operands[2])) == 0.0):
        pred = op.operands[0]
    else:
        return None
    cmp = pred.owner
    if cmp.opcode != "compare" or cmp.attributes.get("comparison_direction") != "EQ":
        return None
    return cmp


def multi_hot(o: Value) -> Operation | None:
    """The ``reduce`` if ``o`` is a one-hot summed over a leading axis, else None."""
    op = o.owner
    if op.opcode == "convert":
        op = op.operands[0].owner
    if op.opcode != "reduce" or len(op.operands) != 2:
        return None
    src = op.operands[0]
    last = src.type.rank - 1
    if last in op.attributes.get("dimensions", []):
        return None
    return op if _one_hot_compare(src) is not None else None


def _one_hot_ids(cmp: Operation) -> Value | None:
    """The broadcast ids ``X`` [..., N] compared with an iota over the last dim, or None."""
    for x, io in ((cmp.operands[0], cmp.operands[1]), (cmp.operands[1], cmp.operands[0])):
        if (x.type.element_type in ("s32", "s64") and iota_along_last(io)
                and constant_along_last(x)):
            return x
    return None


def _finite_constant(table: Value) -> bool:
    arr = constant_array(table)
    return arr is not None and bool(np.all(np.isfinite(arr.astype(np.float64))))


class OneHotDot(RewritePattern):
    def __init__(self, assume_finite: bool) -> None:
        self.assume_finite = assume_finite

    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode != "dot" or len(op.operands) != 2:
            return
        o, table = op.operands
        dn = op.attributes.get("dot_dimension_numbers", {})
        if (table.type.rank != 2 or o.type.rank < 2 or dn.get("lhs_batch_dimensions")
                or dn.get("rhs_batch_dimensions")
                or dn.get("lhs_contracting_dimensions") != [o.type.rank - 1]
                or dn.get("rhs_contracting_dimensions") != [0]):
            return
        cmp = _one_hot_compare(o)
        if cmp is None:
            multi = multi_hot(o)
            if multi is not None:
                note(PASS, op, f"dot {op.name} multiplies the table by a multi-hot matrix "
                               f"(one-hot summed over a bag by {multi.name}): a bag sum, not "
                               "rewritten (count * row rounds unlike repeated adds); write "
                               "the one-hot product first, then sum")
            return
        x = _one_hot_ids(cmp)
        if x is None:
            note(PASS, op, f"dot {op.name} multiplies a 0/1 matrix built by {cmp.name}, but "
                           "not provably one_hot(ids) (ids broadcast along, iota over the "
                           "vocabulary dim)")
            return
        n, d = table.type.dims
        et = table.type.element_type
        if o.type.element_type != et or op.result.type.element_type != et:
            note(PASS, op, f"one-hot dot {op.name}: one-hot {o.type.element_type} x table {et}"
                           f" -> {op.result.type.element_type} mixes types")
            return
        if not (self.assume_finite or _finite_constant(table)):
            note(PASS, op, f"one-hot dot {op.name} is a lookup of {table.owner.name}, equal "
                           "to a gather only if the table holds no Inf/NaN (0*Inf=NaN in the "
                           "dot); not proven here: rewrite with assume_finite_tables "
                           "(--assume_finite_tables)")
            return
        emit = Emit(rw, op)
        ids = emit.first_along_last(x)                         # [...]
        lead = ids.type.dims
        r = len(lead)
        idx = emit.reshape(ids, lead + (1,))
        gather = row_gather(emit, table, idx, None, "onehot.gather")
        it = ids.type.element_type
        ge = emit.compare(ids, emit.splat(0, it, lead), "GE")
        lt = emit.compare(ids, emit.splat(n, it, lead), "LT")
        ok = emit.op("and", [ge, lt], Shape.array("pred", lead))
        okb = emit.broadcast(ok, lead + (d,), list(range(r)))
        out = emit.op("select", [okb, gather, emit.splat(0, et, lead + (d,))],
                      Shape.array(et, lead + (d,)), name="onehot.select")
        rw.replace_op(op, out)


@register_pass
@dataclasses.dataclass(frozen=True)
class OneHotDotPass(PatternPass):
    name = PASS
    assume_finite_tables: bool = False

    def patterns(self) -> list[RewritePattern]:
        return [OneHotDot(self.assume_finite_tables)]
