"""``batched-bags``: bags whose lookups have other dims than the [B,P] of the canonical form
become [M,P,D] bags reduced over axis 1, then reshaped back -- ids ``[B,F,P]`` (several
multi-hot features of one table, or per-feature offsets into one concatenated table, summed
over the bag: ``t[ids].sum(2)``, or over another axis), or one bag of 1-D ids
(``t[ids].sum(0)``):

    reduce(x [L..., D], {r})  =>  reshape(reduce(x' [M,P,D], {1}) [M,D]) [kept L..., D]

where x is a row lookup, optionally through a ``convert`` of its rows, a multiply by weights
or a scalar and jnp.where's ``select(mask, rows, 0)``; x' is the same chain on the lookups
reordered (the kept dims first, the reduced one last, a transpose of the ids) and grouped
(a reshape): P = the reduced dim, M = the product of the kept ones. Values beside
the lookup (weights, mask, fill) must not vary along the row dim D; each is first broadcast
to the lookup dims, reordered the same way and broadcast back along D. Every element of the
reduction keeps its value and its place along the reduced dim, so the kernels' padded-bag
order applies (checked against XLA:CPU for every form above). Not taken: a reduction over
several dims (XLA:CPU adds ``sum((1, 2))`` of [3,2,5,8] in another order than a bag of 10),
and a weight that does not vary along the bag (one per kept index): XLA:CPU factors it out
of the sum (see scale-to-weights). Nor a bag whose result XLA:CPU merges into, fuses into or
computes in a consuming op (``reduce_merge``: a loss's ``pooled.sum()``): the padded-bag
pattern would refuse it, and the regrouped reduce, left in XLA, would change how XLA:CPU
merges it (another order of adds). Nor, where the rows must be added in XLA:CPU's order
(``xla_order``: the CPU rewrite), a sum over the leading axis that XLA:CPU splits across its
threads (``padded_order.check_lookup_layout``): it keeps its layout, with the reason noted.
"""

from __future__ import annotations

import dataclasses
import math

from ember_xla.hlo.shape import Shape
from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import register_pass
from ember_xla.ir.rewriter import PatternRewriter, RewritePattern
from ember_xla.ir.value import Value
from ember_xla.native.padded_order import OrderNotReproduced, check_lookup_layout
from ember_xla.rewrites.canonicalize.base import PatternPass
from ember_xla.rewrites.canonicalize.build import Emit
from ember_xla.rewrites.canonicalize.lookups import lookup_ids, relookup, row_lookup
from ember_xla.rewrites.canonicalize.notes import note
from ember_xla.rewrites.reduce_merge import computed_with_consumer, merged_by_xla

_UNARY = ("convert",)


class _Bags:
    """How lookup dims [L...] map to [M,P]: ``perm`` (the kept dims, then the reduced one)."""

    def __init__(self, lead: tuple[int, ...], r: int) -> None:
        kept = [k for k in range(len(lead)) if k != r]
        self.perm = kept + [r]
        self.kept_dims = tuple(lead[k] for k in kept)
        self.m = math.prod(self.kept_dims)
        self.p = lead[r]

    def group(self, emit: Emit, v: Value) -> Value:
        """A value with one element per lookup [L...] as [M,P]."""
        if self.perm != list(range(len(self.perm))):
            dims = tuple(v.type.dims[k] for k in self.perm)
            v = emit.op("transpose", [v], Shape.array(v.type.element_type, dims),
                        {"dimensions": list(self.perm)})
        return emit.reshape(v, (self.m, self.p))


def _chain(v: Value, r: int, depth: int = 8) -> bool:
    """Does ``v`` reach a row lookup through single-use ops this pass can regroup?"""
    if depth == 0 or v.owner is None or len(v.uses) != 1:
        return False
    if row_lookup(v) is not None:
        return True
    op = v.owner
    if op.opcode in _UNARY:
        return _chain(op.operands[0], r, depth - 1)
    if op.opcode == "multiply":
        a, b = op.operands
        return any(_chain(x, r, depth - 1) and _beside(y, r)
                   for x, y in ((a, b), (b, a)))
    if op.opcode == "select":
        m, rows, zero = op.operands
        return _beside(m, r) and _beside(zero, r, scalar=True) and _chain(rows, r, depth - 1)
    return False


def _beside(v: Value, r: int, scalar: bool = False) -> bool:
    """A broadcast not varying along D: of a scalar, or (unless ``scalar``) of values that
    vary along the bag (a weight per bag would be factored out of the sum by XLA:CPU)."""
    op = v.owner
    if op is None or op.opcode != "broadcast":
        return False
    dims = op.attributes.get("dimensions", [])
    if not dims:
        return True
    return not scalar and v.type.rank - 1 not in dims and r in dims


def _regroup(emit: Emit, v: Value, bags: _Bags, d: int) -> Value:
    """``v`` [L..., D] of a chain ``_chain`` accepted, as [M,P,D]."""
    shape = (bags.m, bags.p, d)
    lk = row_lookup(v)
    if lk is not None:
        return relookup(emit, lk, bags.group(emit, lookup_ids(emit, lk)))
    op = v.owner
    et = v.type.element_type
    if op.opcode in _UNARY:
        x = _regroup(emit, op.operands[0], bags, d)
        return emit.op(op.opcode, [x], Shape.array(et, shape), dict(op.attributes))
    lead = tuple(v.type.dims[:-1])
    operands = []
    for x in op.operands:
        b = x.owner
        if b.opcode != "broadcast":  # the chain (``_chain``: the others are broadcasts)
            operands.append(_regroup(emit, x, bags, d))
            continue
        src, mapping = b.operands[0], b.attributes.get("dimensions", [])
        if not mapping:
            operands.append(emit.broadcast(src, shape, []))
            continue
        per_lookup = emit.broadcast(src, lead, mapping) if mapping != list(
            range(len(lead))) else src
        grouped = bags.group(emit, per_lookup)
        operands.append(emit.broadcast(grouped, shape, [0, 1]))
    return emit.op(op.opcode, operands, Shape.array(et, shape), dict(op.attributes))


PASS = "batched-bags"


class BatchedBag(RewritePattern):
    def __init__(self, xla_order: bool = True) -> None:
        self.xla_order = xla_order

    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode != "reduce" or len(op.operands) != 2:
            return
        x = op.operands[0]
        rank = x.type.rank
        dims = op.attributes.get("dimensions", [])
        if rank < 2 or len(dims) != 1 or dims[0] == rank - 1:
            return
        r = dims[0]
        if rank == 3 and r == 1:
            return  # already the canonical [B,P,D] bag
        if not _chain(x, r) or merged_by_xla(op) or computed_with_consumer(op):
            return
        if self.xla_order and r == 0 and rank > 2:
            try:
                check_lookup_layout(x.type.size, "a reduce over the leading axis of "
                                    f"{list(x.type.dims[:-1])} lookups")
            except OrderNotReproduced as e:
                note(PASS, op, f"reduce {op.name}: {e}")
                return
        emit = Emit(rw, op)
        d = x.type.dims[-1]
        bags = _Bags(tuple(x.type.dims[:-1]), r)
        rows = _regroup(emit, x, bags, d)
        attrs = dict(op.attributes)
        attrs["dimensions"] = [1]
        new = emit.op("reduce", [rows, op.operands[1]],
                      Shape.array(op.result.type.element_type, (bags.m, d)), attrs,
                      callees=list(op.callees), name=op.name)
        rw.replace_op(op, emit.reshape(new, bags.kept_dims + (d,)))


@register_pass
@dataclasses.dataclass(frozen=True)
class BatchedBagsPass(PatternPass):
    name = PASS
    xla_order: bool = True

    def patterns(self) -> list[RewritePattern]:
        return [BatchedBag(self.xla_order)]
