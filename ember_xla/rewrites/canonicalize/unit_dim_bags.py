"""``unit-dim-bags``: bags of rows of one element (D = 1: a factorization machine's or a
wide-and-deep model's first-order weights, ``bias(ids)``) summed the ways the models write
them, into the canonical bag that keeps its unit row dim:

    reduce(x [L..., 1], {r, last})             (``w[ids].sum((1, 2))``, weighted:
                                                ``(w[ids] * v[..., None]).sum((1, 2))``)
    reduce(f(reshape(x)) [L...], {r})          (``w[ids][..., 0].sum(1)``, ``tf.squeeze``;
                                                ``(w[ids][..., 0] * v).sum(1)``, masked)
      =>  reshape(reduce(f'(x) [L..., 1], {r}) [kept L..., 1]) [kept L...]
    dot(reshape(x) [B,P], v [B,P]), batch {0}, contracting {1}   (``einsum('bf,bf->b', ...)``)
      =>  reshape(dot(x [B,P,1], v) [B,1]) [B]

where x is a row lookup, optionally through ``convert``s of its rows, and ``f`` a chain of
elementwise ops (weights, a mask's select, converts) applied after the squeeze: ``f'`` is the
same chain at the unit-dim shape, its other operands reshaped to it. A reduction over a dim of
size 1 adds nothing and an elementwise op commutes with a reshape, so every sum keeps its
elements and their order (checked against XLA:CPU for each form:
tests/rewrites/canonicalize/test_unit_dim_bags.py); ``batched-bags`` then brings lookups of
other dims than [B,P] to the [B,P,1] bag, and the bag patterns decide whether its order is
reproduced. Not taken, as in ``batched-bags``: a bag whose result XLA:CPU merges into or
computes in a consuming op (``reduce_merge``)."""

from __future__ import annotations

from collections.abc import Callable

from ember_xla.hlo.shape import Shape
from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import register_pass
from ember_xla.ir.rewriter import PatternRewriter, RewritePattern
from ember_xla.ir.value import Value
from ember_xla.rewrites.canonicalize.base import PatternPass
from ember_xla.rewrites.canonicalize.build import Emit
from ember_xla.rewrites.canonicalize.lookups import row_lookup
from ember_xla.rewrites.reduce_merge import computed_with_consumer, merged_by_xla

#: elementwise ops a first-order term applies to its squeezed rows before the sum
_CHAIN = ("convert", "multiply", "select")
_MAX_CHAIN = 4


def _rows(v: Value) -> bool:
    """A row lookup, or ``convert``s of one, used only here."""
    while row_lookup(v) is None:
        op = v.owner
        if op is None or op.opcode != "convert" or len(v.uses) != 1:
            return False
        v = op.operands[0]
    return True


def _chain_over(v: Value, leaf: Callable[[Value], bool], depth: int = _MAX_CHAIN) -> bool:
    """Is ``v`` a ``leaf``, or a chain of elementwise ops (each used only here) with exactly
    one operand of its shape on the way to one?"""
    if leaf(v):
        return True
    op = v.owner
    if depth == 0 or op is None or op.opcode not in _CHAIN or len(v.uses) != 1:
        return False
    return sum(_chain_over(x, leaf, depth - 1) for x in op.operands
               if tuple(x.type.dims) == tuple(v.type.dims)) == 1


def _squeeze_of_rows(v: Value) -> bool:
    """``reshape(x [L..., 1]) [L...]`` of rows x, used only here."""
    op = v.owner
    return (op is not None and op.opcode == "reshape" and len(v.uses) == 1
            and tuple(op.operands[0].type.dims) == tuple(v.type.dims) + (1,)
            and _rows(op.operands[0]))


def _weighted_rows(v: Value) -> bool:
    """Rows (``_rows``) through elementwise ops of the chain."""
    return _chain_over(v, _rows)


def _squeezed(v: Value) -> bool:
    """Is ``v`` [L...] a chain of elementwise ops over ``reshape(x [L..., 1])``, x rows?"""
    return _chain_over(v, _squeeze_of_rows)


def _unsqueeze(emit: Emit, v: Value) -> Value:
    """``v`` of a chain ``_squeezed`` accepted, rebuilt at [L..., 1]."""
    op = v.owner
    dims = tuple(v.type.dims) + (1,)
    if op.opcode == "reshape" and tuple(op.operands[0].type.dims) == dims:
        return op.operands[0]
    operands = [_unsqueeze(emit, x) if _squeezed(x) else emit.reshape(x, dims)
                for x in op.operands]
    return emit.op(op.opcode, operands, Shape.array(v.type.element_type, dims),
                   dict(op.attributes))


def _unit_rows(op: Operation) -> tuple[Value | None, int] | None:
    """(the [L..., 1] operand when it exists, else None to rebuild; the bag dim r) of a
    reduce in one of the two forms."""
    x = op.operands[0]
    dims = sorted(op.attributes.get("dimensions", []))
    if x.type.rank >= 2 and x.type.dims[-1] == 1 and len(dims) == 2 \
            and dims[1] == x.type.rank - 1 and _weighted_rows(x):
        return x, dims[0]
    if len(dims) == 1 and _squeezed(x):
        return None, dims[0]
    return None


class UnitDimBag(RewritePattern):
    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode != "reduce" or len(op.operands) != 2:
            return
        found = _unit_rows(op)
        if found is None or merged_by_xla(op) or computed_with_consumer(op):
            return
        emit = Emit(rw, op)
        x, r = found
        if x is None:
            x = _unsqueeze(emit, op.operands[0])
        kept = tuple(d for k, d in enumerate(x.type.dims[:-1]) if k != r)
        attrs = dict(op.attributes)
        attrs["dimensions"] = [r]
        new = emit.op("reduce", [x, op.operands[1]],
                      Shape.array(op.result.type.element_type, kept + (1,)), attrs,
                      callees=list(op.callees), name=op.name)
        rw.replace_op(op, emit.reshape(new, kept))


class UnitDimDot(RewritePattern):
    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode != "dot" or op.result.type.rank != 1:
            return
        dn = op.attributes.get("dot_dimension_numbers", {})
        if any([int(x) for x in dn.get(k, [])] != v
               for k, v in (("lhs_batch_dimensions", [0]), ("rhs_batch_dimensions", [0]),
                            ("lhs_contracting_dimensions", [1]),
                            ("rhs_contracting_dimensions", [1]))):
            return
        a, b = op.operands
        if a.type.rank != 2 or b.type.rank != 2:
            return
        side = [k for k, v in enumerate((a, b)) if _squeezed(v)]
        if len(side) != 1 or merged_by_xla(op):
            return
        emit = Emit(rw, op)
        operands = list(op.operands)
        operands[side[0]] = _unsqueeze(emit, operands[side[0]])
        b_dim = op.result.type.dims[0]
        new = emit.op("dot", operands, Shape.array(op.result.type.element_type, (b_dim, 1)),
                      dict(op.attributes), name=op.name)
        rw.replace_op(op, emit.reshape(new, (b_dim,)))


@register_pass
class UnitDimBagsPass(PatternPass):
    name = "unit-dim-bags"
    rewrites = (UnitDimBag, UnitDimDot)
