"""``ember.padded_bag``: fixed-size bags ``table[ids]`` of shape [B,P,D] reduced over P by a
``reduce`` (jnp.sum/max/mean(axis=1), Keras Embedding + reduce_sum/mean, flax Embed), with
optional per-lookup weights or a 0/1 padding mask multiplied in.

A sum whose rows are masked by a ``select`` first -- ``jnp.where(mask[..., None], rows,
0).sum(1)``, Keras' mask propagation into ``GlobalAveragePooling1D`` -- passes the mask
([B,P] pred) as the kernel's last operand, where the rows are added in an order other than
one after the other (the masked-bag-to-segments canonicalization takes the others): a masked
lookup adds +0, which changes no sum that starts at +0 (such a sum is never -0), so the
kernel skips it in XLA:CPU's order of the unmasked bag.

An unweighted bag of an f32 table converted to bf16 (flax ``nn.Embed(dtype=bfloat16)`` over f32
parameters) reads the f32 table with ``row_type="bf16"``: the kernel rounds each value as it
reads it, as XLA:CPU's gather fused with the convert does, and nothing writes the converted
table out. Rows rounded after the gather (``convert(gather(table), bf16)``) are read the same way
below YNNPACK's sizes; from them on XLA:CPU's YNNPACK fusion sums the f32 rows unrounded, and so
does the call."""

from __future__ import annotations

import dataclasses
import math

from ember_xla.custom_calls import MINMAX_ORDERS, PADDED_BAG
from ember_xla.hlo.shape import Shape
from ember_xla.ir.operation import Operation
from ember_xla.native.padded_order import (
    BagSum,
    OrderNotReproduced,
    minmax_order,
    sum_order,
    ynn_reduces,
)
from ember_xla.rewrites.cluster import Cluster
from ember_xla.rewrites.lookup import (
    D_FIRST_UNTAKEN,
    INTEGER_TYPES,
    STACKED_UNTAKEN,
    Lookup,
    loop_index_type,
    picks_elements,
    quantized_reason,
)
from ember_xla.rewrites.matcher import Pattern
from ember_xla.rewrites.patterns.common import (
    ZERO_FILL_BAG,
    combiner_name,
    lookup_of,
    make_cluster,
    split_weighted,
    weights_chain,
)
from ember_xla.rewrites.reduce_merge import (
    computed_with_consumer,
    merged_by_xla,
    weights_computed_by_ynnpack,
)
from ember_xla.rewrites.refs import Ref, binary_combiner, plus_zero, resolve, scalar_constant
from ember_xla.rewrites.same_value import same_value
from ember_xla.rewrites.walk import NoMatch, Walk


def _mask_select(rows: Ref) -> bool:
    """Is ``rows`` ``select(mask, rows, +0)`` (not jnp.take's fill, whose fill is NaN)?"""
    sel = resolve(rows)
    return sel.op.opcode == "select" and plus_zero(Ref(sel.op.operands[2], sel.stack))


def masked_rows(walk: Walk, sel: Ref, n_lookups: int) -> tuple[Ref, Ref]:
    """``select(broadcast(mask), rows, +0)`` -> (rows, the [B,P] pred mask), claiming the
    select and the mask's broadcasts."""
    walk.take(sel)
    mask = weights_chain(walk, Ref(sel.op.operands[0], sel.stack), n_lookups)
    if mask.value.type.element_type != "pred":
        raise NoMatch(f"the mask {mask.op.name} {mask.value.type} is not a pred per lookup")
    return Ref(sel.op.operands[1], sel.stack), mask


#: The note of a bag whose order is the one XLA:CPU gives it in the model (its products or its
#: weights' broadcast shared with other code), not the one it gives the bag alone: the outlined
#: computation alone is summed otherwise, so only the model's outputs check the call.
IN_CONTEXT_ORDER = ("summed in the order XLA:CPU gives it in this model, where other code "
                    "shares its products or its weights' broadcast (checked by the model's "
                    "outputs, bit for bit)")


def _shared_weights(rows: Ref) -> bool:
    """Is ``rows`` a multiply by weights broadcast to the rows' shape whose products other code
    reads too (a factorization machine's ``e * e``), or whose broadcast other code of the
    computation makes the same way (a training step's backward multiplies the cotangent by the
    same mask, and XLA's CSE computes that broadcast once for both)? Then YNNPACK gets the
    full-size weights or products: no dot, the rounded products summed as a scaled bag's."""
    m = resolve(rows).op
    if m.opcode != "multiply":
        return False
    if len(m.result.users) > 1:  # the products themselves feed other code (an FM's e * e)
        return True
    for v in m.operands:
        w = v.owner
        if w is None or w.opcode != "broadcast" or w.parent is None:
            continue
        if any(o is not w and o.opcode == "broadcast" and same_value(o.result, w.result)
               for o in w.parent.ops):
            return True
    return False


def _untaken_lookup(op: Operation) -> str | None:
    """Why the rows this reduce sums are not a bag the patterns take, or None: a gather
    per table from stacked tables (``jax.vmap`` over a [K,N,D] stack) that was not regrouped
    into one table, or rows looked up with the row dim first (``jax.vmap`` over the table's
    columns, penzai's named axes; ``transposed-table`` made them a transposed row gather).
    Walks from the reduced values through a few single-operand ops or jnp.take's fill."""
    o = op.operands[0].owner
    for _ in range(6):
        if o is None or not o.operands:
            return None
        if o.opcode == "gather":
            dn = o.attributes.get("gather_dimension_numbers", {})
            stacked = dn.get("operand_batching_dims") and not picks_elements(o)
            return STACKED_UNTAKEN.format(name=o.name, table=o.operands[0].type.to_text(
                False)) if stacked else None
        src = o.operands[0].owner
        if (o.opcode == "transpose" and src is not None and src.opcode == "gather"
                and o.attributes.get("dimensions", [])[-1:] != [o.result.type.rank - 1]):
            return D_FIRST_UNTAKEN.format(name=src.name)
        o = o.operands[1 if o.opcode == "select" else 0].owner
    return None


def scale_of(weights: Ref | None) -> str | None:
    """Are the per-lookup weights one scalar broadcast to every lookup (rows scaled by one
    number, ``scale-to-weights``' form)? "constant" (a literal), "value" (computed), else None:
    XLA:CPU multiplies such rows by a broadcast scalar, not by an array of weights, and sums
    them in another order (``padded_order.BagSum.scale``)."""
    if weights is None:
        return None
    ref = resolve(weights)
    while ref.op.opcode in ("broadcast", "reshape") and ref.value.type.size > 1:
        ref = resolve(Ref(ref.op.operands[0], ref.stack))
    if ref.value.type.size != 1:
        return None
    return "constant" if scalar_constant(ref) is not None else "value"


def _bf16_of_f32(walk: Walk, ref: Ref) -> bool:
    """Is ``ref`` ``convert(x, bf16)`` of f32 values, in the walk's computation, that only this
    bag reads? (The table of flax ``nn.Embed(dtype=bfloat16)``; the rows of a gather rounded
    after it, as Keras 3's mixed_bfloat16 ``Embedding`` casts its output.)"""
    op = ref.op
    return (ref.top and op is not None and op.opcode == "convert" and walk.can_take(ref)
            and ref.value.type.element_type == "bf16"
            and op.operands[0].type.element_type == "f32")


def read_as_bf16(walk: Walk, lk: Lookup) -> tuple[Lookup, str]:
    """A lookup of ``convert(table, bf16)`` from an f32 table (flax ``nn.Embed(dtype=
    bfloat16)`` over f32 parameters), whose convert only this bag reads: (the lookup of the f32
    table, "bf16"), the kernel rounding each value as it reads it -- XLA:CPU fuses the convert
    into the gather, so it never writes the converted table out either. Else (lk, "")."""
    if not _bf16_of_f32(walk, lk.table):
        return lk, ""
    walk.take(lk.table)
    return dataclasses.replace(lk, table=Ref(lk.table.op.operands[0])), "bf16"


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

    def _summed_rows(self, walk: Walk, rows: Ref, src: Shape) -> tuple[Ref, str, bool]:
        """(the rows the bag sums, the type they are read in, whether they are f32 rows
        rounded to bf16 after the gather: Keras 3's mixed_bfloat16 Embedding), the converts
        before the reduce claimed by ``walk``."""
        table_type = src.element_type
        if rows.op.opcode == "convert" and walk.can_take(rows):
            # jnp.sum / tf.reduce_sum of f16/bf16 rows: convert to f32, reduce in f32 (the
            # kernel accumulates in its output type); f32 -> f32 converts are no-ops
            table_type = rows.op.operands[0].type.element_type
            if table_type in INTEGER_TYPES:
                raise NoMatch(f"the bag sums {quantized_reason(table_type)}")
            if table_type != src.element_type and not (
                    src.element_type == "f32" and table_type in ("f16", "bf16")):
                raise NoMatch(f"the bag is reduced in {src.element_type} after converting "
                              f"{table_type} rows; only f16/bf16 -> f32 is modelled")
            walk.take(rows)
            rows = Ref(rows.op.operands[0])
        if not (self.xla_order and table_type == "bf16" and src.element_type == "f32"
                and _bf16_of_f32(walk, rows)):
            return rows, table_type, False
        # Keras 3's mixed_bfloat16 Embedding: convert(gather(f32 table), bf16)
        walk.take(rows)
        rows = Ref(rows.op.operands[0])
        try:
            to_ynn = ynn_reduces(math.prod(src.dims))
        except OrderNotReproduced as e:
            raise NoMatch(str(e)) from None
        if to_ynn:
            # measured: YNNPACK's fusion of convert(convert(rows, bf16), f32) + reduce
            # sums the f32 rows unrounded (under both excess-precision settings)
            return rows, "f32", False
        return rows, table_type, True

    def match(self, op: Operation) -> Cluster:
        if len(op.operands) != 2:
            raise NoMatch(f"variadic reduce with {len(op.operands)} operands")
        src = op.operands[0].type
        if src.rank != 3 or op.attributes.get("dimensions", []) != [1]:
            # (batched-bags regroups other bags unless XLA merges them into a consumer)
            raise NoMatch(merged_by_xla(op) or _untaken_lookup(op) or f"reduce of {src} over "
                          f"{op.attributes.get('dimensions')} is not a [B,P,D] bag reduced "
                          "over P")
        combiner = combiner_name(binary_combiner(op), f"reduce {op.name}")
        merged = merged_by_xla(op) if self.xla_order else None
        if merged:
            raise NoMatch(merged)
        if combiner in ("max", "min") and not self.xla_order:
            raise NoMatch(f"reduce {op.name} is a {combiner} bag: its kernel reproduces XLA:CPU's "
                          "NaN and signed-zero semantics, which the DAE programs do not, so "
                          "the cluster stays in XLA")
        init = scalar_constant(Ref(op.operands[1]))
        if init is None:
            raise NoMatch(f"reduce {op.name} starts from a non-constant value")
        walk = Walk(op)
        b, p, _ = src.dims
        rows, table_type, keras_bf16 = self._summed_rows(walk, Ref(op.operands[0]), src)
        mask = None
        if self.xla_order and combiner == "sum" and init == 0.0 and _mask_select(rows):
            rows, mask = masked_rows(walk, walk.enter(rows), b * p)
        shared = _shared_weights(rows)
        rows, weights = split_weighted(walk, rows, b * p)
        if mask is not None and weights is not None:
            raise NoMatch(f"reduce {op.name} sums masked rows times weights: the masked kernel "
                          "takes unweighted bags")
        lk = lookup_of(walk, rows)
        if lk.lookup_dims != (b, p):
            raise NoMatch(f"lookups {lk.lookup_dims} do not form the reduced [B,P]=[{b},{p}]")
        if lk.index_mode == "zero":
            raise NoMatch(ZERO_FILL_BAG)
        if lk.table.value.type.dims[0] == 1 and lk.index_mode == "clip":
            # every id clamps to row 0: XLA:CPU folds the gather into a broadcast and the sum
            # of the broadcast into a multiply by P, which rounds differently from P adds
            raise NoMatch("a one-row table looked up in clip mode: XLA:CPU folds the bag's sum "
                          "into a multiply (another order), so the cluster stays in XLA")
        if lk.table.value.type.element_type != ("f32" if keras_bf16 else table_type):
            raise NoMatch("the reduction runs in a different type than the table")
        d = src.dims[2]
        # the ids' own type: the loop fusion computes on it (wrap, clamp, jnp.take's bounds
        # test) before the gather, also where the walk stopped at a convert to s32
        index_type = loop_index_type(lk.indices.value)
        bag = BagSum(b, p, d, src.element_type, combiner, init, weights is not None,
                     table_type, index_type, lk.index_mode, lk.wrap_negative,
                     scale=scale_of(weights), shared_weights=shared and weights is not None,
                     masked=mask is not None)
        try:
            if combiner in ("max", "min"):
                # XLA:CPU's own loop propagates NaN, YNNPACK's reduce (from 4096 elements)
                # drops it; the rule reproduces both (docs/RELIABILITY.md)
                order = minmax_order(bag)
            else:
                order = sum_order(bag) if self.xla_order else "sequential"
        except OrderNotReproduced as e:
            raise NoMatch(str(e)) from None
        if self.xla_order and (joined := computed_with_consumer(op)):
            raise NoMatch(joined)
        row_type = "bf16" if keras_bf16 else ""
        if keras_bf16 and (weights is not None or mask is not None or order in MINMAX_ORDERS):
            raise NoMatch(f"reduce {op.name} sums f32 rows rounded to bf16 after the gather "
                          "(Keras' mixed_bfloat16) with weights, a mask or in a max/min "
                          "order: the kernel reads rows as bf16 in unweighted sum orders only")
        if self.xla_order and not keras_bf16 and weights is None and order not in MINMAX_ORDERS:
            lk, row_type = read_as_bf16(walk, lk)
        cluster = make_cluster(self, walk, lk, [("ids", lk.indices)], weights, combiner, init)
        cluster.attrs["row_type"] = row_type
        if (self.xla_order and weights is not None and src.element_type == "f32"
                and ynn_reduces(b * p * d)  # (an unmodelled setting raised in sum_order)
                and (why := weights_computed_by_ynnpack(weights.value.owner, cluster.owned))):
            raise NoMatch(why)
        cluster.attrs["sum_order"] = order
        if bag.shared_weights and self.xla_order:
            cluster.notes.append(IN_CONTEXT_ORDER)
        if mask is not None:
            cluster.inputs.append(mask.value)
            cluster.input_roles.append("mask")
            cluster.notes.append(f"padding mask {mask.op.name}: masked lookups add nothing")
        return cluster

