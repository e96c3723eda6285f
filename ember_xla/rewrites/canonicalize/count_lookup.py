"""``count-as-lookup``: a segment sum of a constant (the members of each segment counted)
as the segment sum of a lookup of a one-row table, which ``ember.segment_reduce`` takes.

``jraph.segment_mean`` (and any ``segment_sum(ones_like(x), ids)``) counts the members of each
segment by scattering a ``[E, D]`` broadcast of ones into ``[S, D]`` zeros. XLA:CPU's scatter
runs one serial loop over every element of every update window: ``E * D`` adds (2.4 ms at
E=160k, D=32: ``benchmarks/bench_shared_lookups.py --cases count``), the work of a segment
sum of ``E`` looked-up rows:

    scatter(broadcast(+0) [S, D], ids, broadcast(c) [E, D])
      =>  scatter(broadcast(+0) [S, D], ids, gather(broadcast(c) [1, D], zeros [E, 1]))

Every update row is still ``c`` in every column, added in the same order with the same
combiner and bounds rule, so XLA:CPU computes the same bits from either form (checked:
tests/rewrites/canonicalize/test_count_lookup.py). The segment-reduce pattern then takes it
(the kernel adds each segment's rows in XLA's order: exact for any values), and the cost model
judges it as any segment sum of ``E`` rows of ``D``. The call's result reaches the count's
consumers as opaque as the scatter's did: a broadcast in its place would let XLA's simplifier
turn ``sum / count`` into ``sum * (1 / count)``, which rounds differently.

Only a scalar constant broadcast over ``[E, D]`` rows, a float type and a sum from +0: the
updates of a computed value broadcast along the row (a loss's cotangent) are left alone, since
XLA:CPU fuses that value's computation with the scatter's consumers differently in another
shape."""

from __future__ import annotations

from ember_xla.hlo.shape import Shape
from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import register_pass
from ember_xla.ir.rewriter import PatternRewriter, RewritePattern
from ember_xla.rewrites.canonicalize.base import PatternPass
from ember_xla.rewrites.canonicalize.build import Emit
from ember_xla.rewrites.canonicalize.lookups import row_gather
from ember_xla.rewrites.lookup import TABLE_TYPES
from ember_xla.rewrites.refs import Ref, binary_combiner, plus_zero, scalar_constant


class CountAsLookup(RewritePattern):
    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode != "scatter" or len(op.operands) != 3 or len(op.results) != 1:
            return
        operand, ids, upd = op.operands
        out = op.result.type
        dn = op.attributes.get("scatter_dimension_numbers", {})
        if (out.rank != 2 or out.element_type not in TABLE_TYPES or upd.type.rank != 2
                or out.dims[1] < 2 or tuple(upd.type.dims[1:]) != tuple(out.dims[1:])
                or dn.get("inserted_window_dims", []) != [0]
                or dn.get("scatter_dims_to_operand_dims", []) != [0]
                or dn.get("update_window_dims", []) != [1]
                or dn.get("input_batching_dims") or dn.get("scatter_indices_batching_dims")):
            return
        c = scalar_constant(Ref(upd))
        if (c is None or upd.owner.opcode != "broadcast" or not plus_zero(Ref(operand))
                or binary_combiner(op) != "add"):
            return
        emit = Emit(rw, op)
        e, d = upd.type.dims
        # (named for the report: "segment_reduce sum over table <scatter>.count_row [1xD]")
        table = emit.op("broadcast", [emit.constant(c, out.element_type)],
                        Shape.array(out.element_type, (1, d)), {"dimensions": []},
                        name=f"{op.name}.count_row")
        rows = row_gather(emit, table, emit.splat(0, "s32", (e, 1)), None, f"{op.name}.ones")
        rw.replace_op(op, emit.op("scatter", [operand, ids, rows], out, dict(op.attributes),
                                  list(op.callees), name=op.name))


@register_pass
class CountAsLookupPass(PatternPass):
    name = "count-as-lookup"
    rewrites = (CountAsLookup,)
