"""A segment sum of rows XLA computes, as ``ember.scatter_grad`` in the forward pass:
``scatter-add(broadcast(0, [S, D]), ids, rows)`` whose ids no lookup of a ``[S, D]`` table
reads, so it is no gradient -- a GNN's messages made by an MLP and summed per receiver
(``jraph.GraphNetwork`` with an edge function, e3nn's ``scatter_sum``), a mixture of experts'
weighted combine, rows gathered and transformed in a way ``ember.segment_reduce`` does not take.

The gradient kernel adds exactly such updates in XLA's order (the rows as XLA computed them;
gathered from a pooled source where the rows are ``gather(source, r)`` or its masked select), so
the cluster owns only the scatter and its zero buffer. It runs after the lookup patterns:
a scatter they take (a segment reduction of looked-up rows) is theirs, and a lookup's gradient
is ``scatter_grad.py``'s. The cost model judges it by the same measured rule as an unfused
gradient (``gradient_rule.py``)."""

from __future__ import annotations

import math

from ember_xla.custom_calls import SCATTER_GRAD
from ember_xla.ir.operation import Operation
from ember_xla.rewrites.cluster import Cluster
from ember_xla.rewrites.matcher import Pattern
from ember_xla.rewrites.patterns.common import folded_into_add, one_row_fold
from ember_xla.rewrites.patterns.forward_lookup import (
    depends_on,
    forward_gather,
    permuted_gather,
    row_gathers,
)
from ember_xla.rewrites.patterns.scatter_grad import kernel_operands, zero_row_scatter
from ember_xla.rewrites.walk import NoMatch, Walk


class SegmentSumOfRows(Pattern):
    name = SCATTER_GRAD.name
    kind = "scatter_grad"
    roots = ("scatter",)
    quiet = True  # what it refuses, the lookup patterns before it have reported

    def match(self, op: Operation) -> Cluster:
        if len(op.operands) != 3:
            raise NoMatch(f"variadic scatter with {len(op.operands)} operands")
        lookup_dims = zero_row_scatter(op)
        ids, upd = op.operands[1], op.operands[2]
        out = op.result.type
        fwd = forward_gather(ids, tuple(out.dims)) or permuted_gather(ids, tuple(out.dims))
        if fwd is not None and not depends_on(fwd.operands[0], op):
            # (a gather of a cotangent computed from this scatter is the segment sum's own
            # transpose in a training step: the scatter is still the forward sum)
            raise NoMatch(f"scatter {op.name} is a lookup's gradient (scatter_grad.py)")
        if (why := folded_into_add(op, "the segment sum")) is not None:
            raise NoMatch(why)
        if math.prod(lookup_dims) == 1:
            raise NoMatch(one_row_fold(op, "the segment sum"))
        walk = Walk(op)
        inputs, roles, shapes = kernel_operands(walk, op, lookup_dims)
        if roles[1] == "updates" and upd.type.rank != 2:
            raise NoMatch(f"scatter {op.name} adds updates {upd.type.to_text(False)}: a "
                          "segment sum of computed rows is taken as [L, D] rows only")
        rows = inputs[1]                                  # the summed rows, or their source
        c = Cluster(self.kind, self.name, op, walk.owned, inputs, roles, {},
                    direction="forward", kernel_shapes=shapes, table_value=rows)
        others = ", ".join(g.name for g in row_gathers(ids, tuple(out.dims)))
        c.notes.append("a segment sum of computed rows: no lookup of a "
                       f"{out.to_text(False)} table reads its ids" + (
                           f" (the row gathers {others} read ids not provably the scatter's: "
                           "if it is their gradient, their update stays in XLA)"
                           if others else ""))
        return c
