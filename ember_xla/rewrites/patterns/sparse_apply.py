"""The sparse apply of a TF/Keras optimizer: the gradient of ``tf.gather`` is IndexedSlices
(the looked-up ids and one gradient row per lookup), and Keras applies it under
``jit_compile=True`` as an XLA ``scatter`` straight into a variable (``ResourceScatterSub``
into the table for SGD, ``ResourceScatterAdd`` of the squared slices into the accumulator for
Adagrad): no zero buffer, the variable's buffer ``may-alias`` the result.

``sparse_apply`` recognises such a scatter -- whole rows of a ``[V, D]`` variable combined with
add or subtract, at the ids (up to reshapes) a row gather of the looked-up table reads -- and
says why it stays in XLA. Neither fused kernel computes what it computes: Keras SGD subtracts
a row's updates one after the other (``(t - u1) - u2`` for a duplicate id) where
``ember.sparse_sgd`` sums them first and applies one fused multiply-add; Keras Adagrad adds
each contribution's square to the accumulator (optax and ``ember.sparse_adagrad`` square the
row's summed gradient) and takes the table's update through data-dependent conditionals of
dynamic shape. The scatter is already a sparse in-place update (no ``[V, D]`` temporary)."""

from __future__ import annotations

from ember_xla.ir.operation import Operation
from ember_xla.ir.value import Value
from ember_xla.rewrites.refs import binary_combiner

SGD_REASON = ("TF/Keras sparse apply: the IndexedSlices gradient is subtracted from the "
              "variable update by update ((t - u1) - u2 for a duplicate id), which "
              "ember.sparse_sgd (a row's gradients summed first, then one fused multiply-add) "
              "does not reproduce bit for bit; the update stays in XLA, already sparse and in "
              "place (no [V, D] temporary)")
SLOT_REASON = ("TF/Keras sparse apply into an optimizer slot: each contribution is "
               "accumulated on its own (Keras Adagrad adds every slice's square, where optax "
               "and ember.sparse_adagrad square the row's summed gradient) and the table's "
               "update runs through data-dependent conditionals of dynamic shape; not "
               "reproducible by ember.sparse_adagrad: the update stays in XLA")


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


def _looked_up_table(ids: Value, dims: tuple[int, ...]) -> Value | None:
    """The ``dims`` table a row gather reads at ``ids`` (up to reshapes of the ids)."""
    for v in _through_reshapes(ids):
        for u in v.owner.users:
            if (u.opcode == "gather" and u.operands[1] is v
                    and tuple(u.operands[0].type.dims) == dims
                    and u.attributes.get("gather_dimension_numbers", {}).get(
                        "collapsed_slice_dims", []) == [0]
                    and list(u.attributes.get("gather_slice_sizes", [])) == [1, dims[1]]):
                return u.operands[0]
    return None


def sparse_apply(op: Operation) -> str | None:
    """The reason a scatter of gradient rows straight into a ``[V, D]`` variable stays in XLA,
    or None if ``op`` is not such a scatter."""
    if len(op.operands) != 3 or op.result.type.rank != 2:
        return None
    dest, ids, _ = op.operands
    combiner = _combiner(op)
    if combiner not in ("add", "subtract") or dest.owner.opcode != "parameter":
        return None
    table = _looked_up_table(ids, tuple(dest.type.dims))
    if table is None:
        return None
    if table is dest:
        return SGD_REASON if combiner == "subtract" else None
    return SLOT_REASON if combiner == "add" else None
