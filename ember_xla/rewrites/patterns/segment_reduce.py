"""``ember.segment_reduce``: rows looked up from a table, optionally weighted, combined into
segments by a ``scatter`` (jax.ops.segment_sum/max/min, tf.math.unsorted_segment_*, GNN
message passing, ragged bags via value_rowids)."""

from __future__ import annotations

import math

from ember_xla.custom_calls import SEGMENT_REDUCE
from ember_xla.ir.operation import Operation
from ember_xla.rewrites.cluster import Cluster
from ember_xla.rewrites.matcher import Pattern
from ember_xla.rewrites.patterns.common import (
    combiner_name,
    folded_into_add,
    lookup_of,
    make_cluster,
    one_row_fold,
    split_weighted,
)
from ember_xla.rewrites.refs import Ref, binary_combiner, scalar_constant
from ember_xla.rewrites.walk import NoMatch, Walk


def segment_chain(walk: Walk, ref: Ref, n_lookups: int) -> Ref:
    """Back from scatter indices through reshapes (a convert stays outside the cluster: the
    kernel then reads exactly the ids XLA's scatter reads)."""
    while (walk.can_take(ref) and ref.op.opcode in ("reshape", "bitcast")
           and ref.op.operands[0].type.size == n_lookups):
        walk.take(ref)
        ref = Ref(ref.op.operands[0])
    if not ref.top:
        raise NoMatch("segment ids are computed inside a called computation")
    if ref.value.type.element_type not in ("s32", "s64"):
        raise NoMatch(f"segment ids {ref.op.name} are {ref.value.type.element_type}, not s32/s64")
    return ref


class SegmentReduce(Pattern):
    name = SEGMENT_REDUCE.name
    kind = "segment_reduce"
    roots = ("scatter",)

    def match(self, op: Operation) -> Cluster:
        if len(op.operands) != 3:
            raise NoMatch(f"variadic scatter with {len(op.operands)} operands")
        out = op.result.type
        if out.rank != 2:
            raise NoMatch(f"scatter result {out} is not [segments, D]")
        dn = op.attributes.get("scatter_dimension_numbers", {})
        sidx_t = op.operands[1].type
        if (dn.get("update_window_dims", []) != [1] or dn.get("inserted_window_dims", []) != [0]
                or dn.get("scatter_dims_to_operand_dims", []) != [0]
                or dn.get("input_batching_dims")):
            raise NoMatch(f"scatter dimension numbers {dn} are not a row-wise segment reduction")
        n_lookups = op.operands[2].type.dims[0] if op.operands[2].type.rank == 2 else -1
        if sidx_t.size != n_lookups or dn.get("index_vector_dim", 0) not in (
                sidx_t.rank, sidx_t.rank - 1):
            raise NoMatch(f"scatter indices {sidx_t} are not one segment id per row")
        combiner = combiner_name(binary_combiner(op), f"scatter {op.name}")
        init = scalar_constant(Ref(op.operands[0]))
        if init is None:
            raise NoMatch(f"scatter {op.name} starts from {op.operands[0].owner.name}, not a "
                          "constant")
        if n_lookups == 1 and combiner == "sum" and init == 0.0:
            raise NoMatch(one_row_fold(op, "the cluster"))
        if combiner == "sum" and init == 0.0 and (why := folded_into_add(op, "the cluster")):
            raise NoMatch(why)
        walk = Walk(op)
        rows, weights = split_weighted(walk, Ref(op.operands[2]), n_lookups)
        lk = lookup_of(walk, rows)
        if math.prod(lk.lookup_dims) != n_lookups or lk.table.value.type.dims[1] != out.dims[1]:
            raise NoMatch("looked-up rows and scatter updates disagree in shape")
        if lk.table.value.type.element_type != out.element_type:
            raise NoMatch("scatter accumulates in a different type than the table")
        segs = segment_chain(walk, Ref(op.operands[1]), n_lookups)
        return make_cluster(self, walk, lk, [("indices", lk.indices), ("segment_ids", segs)],
                            weights, combiner, init)
