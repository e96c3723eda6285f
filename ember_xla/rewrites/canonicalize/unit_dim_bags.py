"""``unit-dim-bags``: bags of rows of one element (D = 1: a factorization machine's or a
wide-and-deep model's first-order weights, ``bias(ids)``) summed the ways the models write
them, into the canonical bag that keeps its unit row dim:

    reduce(x [L..., 1], {r, last})             (``w[ids].sum((1, 2))``)
    reduce(reshape(x) [L...], {r})             (``w[ids][..., 0].sum(1)``, ``tf.squeeze``;
                                                also through converts after the squeeze)
      =>  reshape(reduce(x [L..., 1], {r}) [kept L..., 1]) [kept L...]

where x is a row lookup, optionally through ``convert``s of its rows. A reduction over a
dim of size 1 adds nothing, so every sum keeps its elements and their order along the bag
(checked against XLA:CPU for each form: tests/rewrites/canonicalize/test_unit_dim_bags.py);
``batched-bags`` then brings lookups of other dims than [B,P] to the [B,P,1] bag. Not
taken, as in ``batched-bags``: a bag whose result XLA:CPU merges into or computes in a
consuming op (``reduce_merge``)."""

from __future__ import annotations

from ember_xla.hlo.shape import Shape
from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import register_pass
from ember_xla.ir.rewriter import PatternRewriter, RewritePattern
from ember_xla.ir.value import Value
from ember_xla.rewrites.canonicalize.base import PatternPass
from ember_xla.rewrites.canonicalize.build import Emit
from ember_xla.rewrites.canonicalize.lookups import row_lookup
from ember_xla.rewrites.reduce_merge import computed_with_consumer, merged_by_xla


def _rows(v: Value) -> bool:
    """A row lookup, or ``convert``s of one, used only here."""
    while row_lookup(v) is None:
        op = v.owner
        if op is None or op.opcode != "convert" or len(v.uses) != 1:
            return False
        v = op.operands[0]
    return True


def _unit_rows(op: Operation) -> tuple[Value, int, list[Operation]] | None:
    """(the lookup x [L..., 1], the bag dim r, the converts between the squeeze and the
    reduce, outermost first) of a reduce in one of the two forms."""
    x = op.operands[0]
    dims = sorted(op.attributes.get("dimensions", []))
    if x.type.rank >= 2 and x.type.dims[-1] == 1 and len(dims) == 2 \
            and dims[1] == x.type.rank - 1 and _rows(x):
        return x, dims[0], []
    if len(dims) != 1:
        return None
    converts, v = [], x
    while v.owner is not None and v.owner.opcode == "convert" and len(v.uses) == 1:
        converts.append(v.owner)
        v = v.owner.operands[0]
    src = v.owner
    if src is None or src.opcode != "reshape" or len(v.uses) != 1:
        return None
    y = src.operands[0]
    if tuple(y.type.dims) != tuple(v.type.dims) + (1,) or not _rows(y):
        return None
    return y, dims[0], converts


class UnitDimBag(RewritePattern):
    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode != "reduce" or len(op.operands) != 2:
            return
        found = _unit_rows(op)
        if found is None or merged_by_xla(op) or computed_with_consumer(op):
            return
        x, r, converts = found
        emit = Emit(rw, op)
        for c in reversed(converts):
            x = emit.op("convert", [x], Shape.array(c.result.type.element_type, x.type.dims),
                        dict(c.attributes))
        kept = tuple(d for k, d in enumerate(x.type.dims[:-1]) if k != r)
        attrs = dict(op.attributes)
        attrs["dimensions"] = [r]
        new = emit.op("reduce", [x, op.operands[1]],
                      Shape.array(op.result.type.element_type, kept + (1,)), attrs,
                      callees=list(op.callees), name=op.name)
        rw.replace_op(op, emit.reshape(new, kept))


@register_pass
class UnitDimBagsPass(PatternPass):
    name = "unit-dim-bags"
    rewrites = (UnitDimBag,)
