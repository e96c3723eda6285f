"""``ember.scatter_grad``: the transpose of a row lookup, as JAX writes it
(``_gather_transpose_rule``): ``scatter-add(broadcast(0, [V, D]), ids, row_grads)`` where
``ids`` is the index operand of a row gather of a ``[V, D]`` table elsewhere in the module
(the forward lookup, reached through the JVP call's tuple once ``fold-tuple-index`` has run)
and ``row_grads`` holds one gradient row per lookup (the pooled gradient broadcast over the
bag axis, gathered by segment id, times weights ... computed by XLA as before).

A TF/Keras optimizer's sparse apply (the IndexedSlices gradient scattered straight into the
variable or its slot, sparse_apply.py) becomes an ``ember.ordered_scatter`` cluster, or a
backward near-miss with the reason it stays in XLA. The transpose of a vmapped lookup
(equinox) reaches this pattern as a row scatter once ``squeeze-scatter`` has run. Not
matched, with a reason: scatters into a non-zero operand, scatters that do not write whole
rows of a rank-2 result (optax's integer-label cross-entropy writes single elements; GNN
degree counting adds ones into a [N] vector) and zero-initialised scatter-adds whose ids no
row gather of a table of the result's shape reads (not the gradient of a lookup: a segment sum
of rows, which ``segment_sum_rows.py`` takes when no lookup pattern does)."""

from __future__ import annotations

import math

from ember_xla.custom_calls import SCATTER_GRAD
from ember_xla.hlo.shape import Shape
from ember_xla.ir.operation import Operation
from ember_xla.ir.value import Value
from ember_xla.rewrites.cluster import Cluster
from ember_xla.rewrites.lookup import TABLE_TYPES
from ember_xla.rewrites.matcher import Pattern, looks_like_lookup
from ember_xla.rewrites.patterns.common import folded_into_add, one_row_fold
from ember_xla.rewrites.patterns.forward_lookup import (
    depends_on,
    forward_gather,
    permuted_gather,
    row_gathers,
)
from ember_xla.rewrites.patterns.sparse_apply import (
    one_row_id_per_update,
    scatters_whole_rows,
    sparse_apply,
)
from ember_xla.rewrites.refs import Ref, binary_combiner, plus_zero, resolve, scalar_constant
from ember_xla.rewrites.walk import NoMatch, Walk


def _zero_operand(op: Operation) -> None:
    zero = resolve(Ref(op.operands[0]))
    if not plus_zero(zero):
        raise NoMatch(f"scatter {op.name} adds into {zero.op.opcode} {zero.op.name}, not a "
                      "+0 table: not a lookup's gradient")


def _rows_of(updates: Value, table: Value) -> bool:
    """Are ``updates`` a gather of rows of ``table`` (directly, or through jnp.take's fill
    select)?"""
    u = resolve(Ref(updates)).op
    if u.opcode == "select":
        u = resolve(Ref(u.operands[1])).op
    return u.opcode == "gather" and u.operands[0] is table


def _row_gather(op: Operation, lookup_dims: tuple[int, ...]) -> bool:
    """Is ``op`` a gather of whole rows of a [S, D] source, one per lookup?"""
    if op.opcode != "gather" or op.operands[0].type.rank != 2:
        return False
    dn = op.attributes.get("gather_dimension_numbers", {})
    r = op.operands[1].type
    ivd = dn.get("index_vector_dim", 0)
    return (dn.get("collapsed_slice_dims", []) == [0] and dn.get("start_index_map", []) == [0]
            and dn.get("offset_dims", []) == [op.result.type.rank - 1]
            and not dn.get("operand_batching_dims")
            and list(op.attributes.get("gather_slice_sizes", []))
            == [1, op.operands[0].type.dims[1]]
            and tuple(r.dims[:ivd]) == lookup_dims
            and (ivd == r.rank or (ivd == r.rank - 1 and r.dims[-1] == 1))
            and r.element_type in ("s32", "s64"))


def zero_row_scatter(op: Operation) -> tuple[int, ...]:
    """The lookup dims of ``op`` when it adds whole float rows, one row id per update, into a
    +0 ``[V, D]`` buffer (a lookup's gradient or a segment sum of rows); else NoMatch."""
    out = op.result.type
    if out.rank != 2 or out.element_type not in TABLE_TYPES:
        raise NoMatch(f"scatter result {out} is not a float [V, D] table gradient")
    ids, upd = op.operands[1], op.operands[2]
    if not scatters_whole_rows(op):
        dn = op.attributes.get("scatter_dimension_numbers", {})
        raise NoMatch(f"scatter {op.name} does not add whole rows of {out} (dimension "
                      f"numbers {dn}, updates {upd.type})")
    if not one_row_id_per_update(op):
        raise NoMatch(f"scatter indices {ids.type} are not one s32/s64 row id per update")
    if binary_combiner(op) != "add":
        raise NoMatch(f"scatter {op.name} does not combine with add")
    if upd.type.element_type != out.element_type:
        raise NoMatch("the updates and the gradient have different types")
    _zero_operand(op)
    return tuple(upd.type.dims[:-1])


def gathered_updates(walk: Walk, upd: Value, lookup_dims: tuple[int, ...]
                     ) -> tuple[Value, Value, Value | None] | None:
    """(source, source_rows, mask or None) when the updates are ``gather(source, rows)`` or
    ``select(broadcast(mask), gather(source, rows), 0)`` (JAX's transpose of a segment sum:
    the pooled gradient gathered by segment id, zero for out-of-range segments), claimed by
    ``walk``; None (nothing claimed) otherwise."""
    mark = walk.snapshot()
    op = upd.owner
    mask = None
    try:
        if op.opcode == "select":
            m, g, z = op.operands
            mb = m.owner
            if (scalar_constant(Ref(z)) != 0.0 or mb.opcode != "broadcast"
                    or mb.attributes.get("dimensions", []) != list(range(len(lookup_dims)))
                    or tuple(mb.operands[0].type.dims) != lookup_dims):
                return None
            walk.take(Ref(upd))
            if walk.can_take(Ref(m)):
                walk.take(Ref(m))
            mask, op = mb.operands[0], g.owner
        if not _row_gather(op, lookup_dims):
            walk.restore(mark)
            return None
        walk.take(Ref(op.result))
    except NoMatch:
        walk.restore(mark)
        return None
    return op.operands[0], op.operands[1], mask


def kernel_operands(walk: Walk, op: Operation, lookup_dims: tuple[int, ...]
                    ) -> tuple[list[Value], list[str], list[Shape]]:
    """The operands of ``ember.scatter_grad`` for the zero-row scatter ``op`` (its zero
    buffer claimed by ``walk``), their roles and the shapes the kernel takes them in:
    ``indices, updates``, or ``indices, source, source_rows[, mask]`` when the updates are
    rows gathered from a source (the kernel then reads them itself)."""
    ids, upd = op.operands[1], op.operands[2]
    zero = Ref(op.operands[0])
    if zero.op.opcode == "broadcast" and walk.can_take(zero):
        walk.take(zero)
    n = math.prod(lookup_dims)
    inputs, roles = [ids, upd], ["indices", "updates"]
    shapes = [Shape.array(ids.type.element_type, (n,)),
              Shape.array(upd.type.element_type, (n, op.result.type.dims[1]))]
    gathered = gathered_updates(walk, upd, lookup_dims)
    if gathered is not None:
        src, rows, mask = gathered
        inputs, roles = [ids, src, rows], ["indices", "source", "source_rows"]
        shapes[1:] = [src.type, Shape.array(rows.type.element_type, (n,))]
        if mask is not None:
            inputs.append(mask)
            roles.append("mask")
            shapes.append(Shape.array("pred", (n,)))
    return inputs, roles, shapes


class ScatterGrad(Pattern):
    name = SCATTER_GRAD.name
    kind = "scatter_grad"
    roots = ("scatter",)
    quiet = True  # most scatters are forward segment reductions: their pattern reports them

    def match(self, op: Operation) -> Cluster:
        if len(op.operands) != 3:
            raise NoMatch(f"variadic scatter with {len(op.operands)} operands")
        applied = sparse_apply(op)
        if isinstance(applied, Cluster):  # a TF/Keras optimizer's scatter into the variable
            return applied
        if applied is not None:
            miss = NoMatch(applied)
            miss.report, miss.direction = True, "backward"
            raise miss
        out = op.result.type
        ids = op.operands[1]
        lookup_dims = zero_row_scatter(op)
        fwd = forward_gather(ids, tuple(out.dims)) or permuted_gather(ids, tuple(out.dims))
        if fwd is None:
            others = ", ".join(u.name for u in row_gathers(ids, tuple(out.dims)))
            why = (f"the row gathers of {out} tables ({others}) read ids not provably the "
                   f"scatter's {ids.owner.name} (equal only through reshapes, converts there "
                   "and back and identical pure arithmetic on the same parameters; two "
                   "parameters equal in value are not)" if others else
                   f"no row gather of a {out} table reads the ids {ids.owner.name}")
            miss = NoMatch(f"{why}: the zero-initialised scatter-add is not the gradient of "
                           "a lookup, so it and its update stay in XLA")
            # reported unless the updates are looked-up rows (a forward segment reduction,
            # which its own pattern reports)
            miss.report = not looks_like_lookup(op)
            raise miss
        if _rows_of(op.operands[2], fwd.operands[0]):
            # the updates are rows of the very table the "lookup" reads (a GNN's messages
            # x[src] summed at dst while x[dst] is looked up too): a forward segment
            # reduction, left to ember.segment_reduce; a lookup's gradient holds cotangents
            raise NoMatch(f"the updates of scatter {op.name} are rows of the table "
                          f"{fwd.name} reads: a segment sum of looked-up rows, not a gradient")
        if depends_on(fwd.operands[0], op):
            # the "lookup" reads a cotangent computed from this scatter: this scatter is the
            # forward segment reduction (left to ember.segment_reduce), not a gradient
            raise NoMatch(f"the gather {fwd.name} reading the same ids depends on scatter "
                          f"{op.name}: a forward segment reduction, not a gradient")
        if (why := folded_into_add(op, "the gradient with its update")) is not None:
            miss = NoMatch(why)
            miss.report, miss.direction = True, "backward"
            raise miss
        if math.prod(lookup_dims) == 1:
            miss = NoMatch(one_row_fold(op, "the gradient"))
            miss.report, miss.direction = True, "backward"
            raise miss
        walk = Walk(op)
        inputs, roles, shapes = kernel_operands(walk, op, lookup_dims)
        c = Cluster(self.kind, self.name, op, walk.owned, inputs, roles, {},
                    direction="backward", kernel_shapes=shapes, table_value=fwd.operands[0])
        c.notes.append(f"transpose of the lookup {fwd.name}")
        return c
