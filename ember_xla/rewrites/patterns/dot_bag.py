"""``ember.padded_bag`` from a masked or weighted bag written as a product over the bag axis:
``jnp.einsum('bl,bld->bd', mask, table[ids])`` / ``lax.dot_general`` with the bag index
contracted and the batch index as batch dimension (either operand order). The order of its
adds is the one rule's (native/padded_order.py, ``sum_order`` of a "dot" bag: for D >= 3
XLA:CPU computes the dot one bag row after the other as ``acc = fma(row, w, acc)``, the
kernel's ``sequential_fma``; measured bit-equal in tests/rewrites/test_dot_bag.py); bags whose
order is not reproduced stay in XLA with the reason. Exact for any table values (a one-hot
product is not: see onehot_dot.py).
f32 only: a bf16/f16 dot's accumulation type is XLA's choice."""

from __future__ import annotations

from ember_xla.custom_calls import PADDED_BAG
from ember_xla.ir.operation import Operation
from ember_xla.native.padded_order import BagSum, OrderNotReproduced, sum_order
from ember_xla.rewrites.cluster import Cluster
from ember_xla.rewrites.matcher import Pattern, looks_like_lookup
from ember_xla.rewrites.patterns.common import (
    ZERO_FILL_BAG,
    lookup_of,
    make_cluster,
    weights_chain,
)
from ember_xla.rewrites.refs import Ref
from ember_xla.rewrites.walk import NoMatch, Walk


def bag_dot_operands(op: Operation) -> tuple[int, int] | None:
    """(rows operand, weights operand) if ``op`` is a dot of rows [B,L,D] with weights
    [B,L] contracting L with B as the batch dimension; else None."""
    if op.opcode != "dot" or len(op.operands) != 2:
        return None
    dn = op.attributes.get("dot_dimension_numbers", {})
    lhs, rhs = (v.type for v in op.operands)
    for rows_i, w_i, rows, w in ((1, 0, rhs, lhs), (0, 1, lhs, rhs)):
        side = {0: "lhs", 1: "rhs"}
        r, s = side[rows_i], side[w_i]
        if (rows.is_array and w.is_array and rows.rank == 3 and w.rank == 2
                and [int(x) for x in dn.get(f"{r}_batch_dimensions", [])] == [0]
                and [int(x) for x in dn.get(f"{s}_batch_dimensions", [])] == [0]
                and [int(x) for x in dn.get(f"{r}_contracting_dimensions", [])] == [1]
                and [int(x) for x in dn.get(f"{s}_contracting_dimensions", [])] == [1]
                and rows.dims[:2] == w.dims):
            return rows_i, w_i
    return None


def _reported(reason: str, op: Operation) -> NoMatch:
    e = NoMatch(reason)
    e.report = looks_like_lookup(op)  # a dot over the bag axis of looked-up rows
    return e


class DotBag(Pattern):
    name = PADDED_BAG.name + ".dot"
    kind = "padded_bag"
    roots = ("dot",)
    quiet = True  # most dots are layers, not bags: only a dot over a bag axis is reported

    def __init__(self, xla_order: bool = True) -> None:
        #: as PaddedBag's: False (the DAE machines) always adds the products in row order
        self.xla_order = xla_order

    def match(self, op: Operation) -> Cluster:
        sides = bag_dot_operands(op)
        if sides is None:
            raise NoMatch(f"dot {op.name} is not rows [B,L,D] times weights [B,L] contracted "
                          "over the bag axis L with B batched")
        try:
            return self._match(op, *sides)
        except NoMatch as e:
            raise _reported(str(e), op) from None

    def _match(self, op: Operation, rows_i: int, w_i: int) -> Cluster:
        types = {v.type.element_type for v in op.operands} | {op.result.type.element_type}
        if types != {"f32"}:
            raise NoMatch(f"dot {op.name} is a bag over {sorted(types)} values; only f32 "
                          "bag products are modelled (a narrower dot accumulates as XLA "
                          "chooses)")
        if op.attributes.get("precision_config", {}).get("operand_precision", []) not in (
                [], ["DEFAULT", "DEFAULT"]):
            raise NoMatch(f"dot {op.name} asks for a non-default precision")
        walk = Walk(op)
        b, p, _ = op.operands[rows_i].type.dims
        weights = weights_chain(walk, Ref(op.operands[w_i]), b * p)
        lk = lookup_of(walk, Ref(op.operands[rows_i]))
        if lk.lookup_dims != (b, p):
            raise NoMatch(f"lookups {lk.lookup_dims} do not form the bags [B,L]=[{b},{p}]")
        if lk.index_mode == "zero":
            raise NoMatch(ZERO_FILL_BAG)
        if lk.table.value.type.element_type != "f32":
            raise NoMatch("the bag's table is not f32")
        d = op.operands[rows_i].type.dims[2]
        bag = BagSum(b, p, d, "f32", "sum", 0.0, True, "f32",
                     lk.indices.value.type.element_type, lk.index_mode, lk.wrap_negative,
                     form="dot")
        try:
            order = sum_order(bag) if self.xla_order else "sequential_fma"
        except OrderNotReproduced as e:
            raise NoMatch(str(e)) from None
        cluster = make_cluster(self, walk, lk, [("ids", lk.indices)], weights, "sum", 0.0)
        cluster.attrs["sum_order"] = order
        cluster.attrs["row_type"] = ""
        return cluster
