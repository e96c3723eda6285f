"""The sparse apply of a TF/Keras optimizer: the gradient of ``tf.gather`` is IndexedSlices
(the looked-up ids and one gradient row per lookup), and Keras applies it under
``jit_compile=True`` as an XLA ``scatter`` straight into a variable (``ResourceScatterSub`` of
``lr * g`` into the table for SGD, ``ResourceScatterAdd`` of the squared slices into the
accumulator for Adagrad): no zero buffer, the variable's buffer ``may-alias`` the result.

``sparse_apply`` recognises such a scatter -- whole rows of a ``[V, D]`` variable combined with
subtract (into the looked-up table) or add (into a slot of its shape), at the ids (up to
reshapes) a row gather of the looked-up table reads -- and makes it an
``ember.ordered_scatter`` cluster: the updates, computed by XLA as before, applied one by one
in index order as XLA:CPU's scatter applies them (``(t - u1) - u2`` for a duplicate id, each
operation rounded), in place (rewrites/fuse_optimizer.py aliases the result with the
variable). Anything else of that form (a bf16 variable, updates of dynamic shape as Keras
Adagrad's table update has) stays in XLA with the reason."""

from __future__ import annotations

import math

from ember_xla.custom_calls import ORDERED_SCATTER
from ember_xla.hlo.shape import Shape
from ember_xla.ir.operation import Operation
from ember_xla.ir.value import Value
from ember_xla.rewrites.cluster import Cluster
from ember_xla.rewrites.refs import binary_combiner

DYNAMIC_REASON = ("TF/Keras sparse apply with updates of dynamic shape ({shape}: Keras "
                  "Adagrad divides the IndexedSlices by the dense sqrt(accumulator + eps) "
                  "through a conditional that also yields the rows whose denominator is 0 or "
                  "NaN); not rewritten: the update stays in XLA")
TYPE_REASON = ("TF/Keras sparse apply into a {dtype} variable: ember.ordered_scatter is f32 "
               "only; the update stays in XLA")


def _combiner(op: Operation) -> str | None:
    """``add``, or ``subtract`` when the combiner is ``existing - update``."""
    c = binary_combiner(op)
    if c is not None or len(op.callees) != 1:
        return c
    g = op.callees[0]
    params = sorted(g.params(), key=lambda p: p.attributes.get("parameter_number", 0))
    root = g.root
    if (root.opcode == "subtract" and len(params) == 2
            and [v.owner for v in root.operands] == params):
        return "subtract"
    return None


def _through_reshapes(v: Value) -> list[Value]:
    """``v`` and the values it is a reshape/copy/convert chain of."""
    out = [v]
    while v.owner is not None and v.owner.opcode in ("reshape", "copy", "bitcast"):
        v = v.owner.operands[0]
        out.append(v)
    return out


def _is_row_gather(u: Operation, dims: tuple[int, ...]) -> bool:
    return (u.opcode == "gather" and tuple(u.operands[0].type.dims) == dims
            and u.attributes.get("gather_dimension_numbers", {}).get(
                "collapsed_slice_dims", []) == [0]
            and list(u.attributes.get("gather_slice_sizes", [])) == [1, dims[1]])


def _is_row_gathered(table: Value) -> bool:
    """Does a row gather read ``table`` (is it a looked-up table)?"""
    dims = tuple(table.type.dims)
    return any(_is_row_gather(u, dims) and u.operands[0] is table for u in table.owner.users)


def _looked_up_table(ids: Value, dims: tuple[int, ...]) -> Value | None:
    """The ``dims`` table a row gather reads at ``ids`` (up to reshapes of the ids: the ids
    the scatter reads, a value they reshape, or a reshape chain of one: Keras reshapes the ids
    of single-id lookups [B,1] for the sparse gradient, canonicalization for the gather)."""
    for v in _through_reshapes(ids):
        near = [v]
        for w in near:  # v and the reshape/copy chains below it (grows while it is walked)
            if len(near) < 16:
                near += [u.result for u in w.users
                         if u.opcode in ("reshape", "copy", "bitcast") and u.results]
            for u in w.users:
                if _is_row_gather(u, dims) and u.operands[1] is w:
                    return u.operands[0]
    return None


def scatters_whole_rows(op: Operation) -> bool:
    """Does scatter ``op`` write whole rows (its updates' last dimension) of a rank-2
    operand, one row per update row?"""
    dest, _, upd = op.operands
    dn = op.attributes.get("scatter_dimension_numbers", {})
    return (dn.get("update_window_dims", []) == [upd.type.rank - 1]
            and dn.get("inserted_window_dims", []) == [0]
            and dn.get("scatter_dims_to_operand_dims", []) == [0]
            and not dn.get("input_batching_dims") and upd.type.rank >= 2
            and upd.type.dims[-1] == dest.type.dims[1])


def one_row_id_per_update(op: Operation) -> bool:
    """Are scatter ``op``'s indices one s32/s64 row id per update row?"""
    _, ids, upd = op.operands
    ivd = op.attributes.get("scatter_dimension_numbers", {}).get("index_vector_dim", 0)
    r = ids.type
    return (tuple(r.dims[:ivd]) == tuple(upd.type.dims[:-1])
            and (ivd == r.rank or (ivd == r.rank - 1 and r.dims[-1] == 1))
            and r.element_type in ("s32", "s64"))


def sparse_apply(op: Operation) -> Cluster | str | None:
    """The ``ember.ordered_scatter`` cluster of a scatter of gradient rows straight into a
    ``[V, D]`` variable, the reason it stays in XLA, or None if ``op`` is not such a scatter."""
    if len(op.operands) != 3 or op.result.type.rank != 2:
        return None
    dest, ids, upd = op.operands
    combiner = _combiner(op)
    if combiner not in ("add", "subtract") or dest.owner.opcode != "parameter":
        return None
    dynamic = [v.type for v in (ids, upd) if any(v.type.dynamic)]
    if dynamic and combiner == "subtract" and _is_row_gathered(dest):
        return DYNAMIC_REASON.format(shape=dynamic[0])
    table = _looked_up_table(ids, tuple(dest.type.dims))
    if table is None or (combiner == "subtract") != (table is dest) or dynamic:
        return None
    if not (scatters_whole_rows(op) and one_row_id_per_update(op)):
        return None
    if {dest.type.element_type, upd.type.element_type} != {"f32"}:
        return TYPE_REASON.format(dtype=dest.type.element_type)
    n = math.prod(upd.type.dims[:-1])
    shapes = [dest.type, Shape.array(ids.type.element_type, (n,)),
              Shape.array("f32", (n, dest.type.dims[1]))]
    c = Cluster(ORDERED_SCATTER.kind, ORDERED_SCATTER.name, op, [op], [dest, ids, upd],
                list(ORDERED_SCATTER.operand_roles), {"combiner": combiner},
                direction="backward", kernel_shapes=shapes, table_value=table)
    c.notes.append("TF/Keras sparse apply into " + ("the table" if table is dest
                                                    else "an optimizer slot"))
    return c
