"""Pieces the cluster patterns share: per-lookup weights and index/segment reshapes."""

from __future__ import annotations

from typing import Any

from ember_xla.rewrites.cluster import Cluster
from ember_xla.rewrites.lookup import (
    Lookup,
    match_lookup,
    quantized_reason,
    quantized_rows,
)
from ember_xla.rewrites.patterns.scatter_fold import Fold, fold_decision
from ember_xla.rewrites.refs import Ref, resolve
from ember_xla.rewrites.walk import NoMatch, Walk

_COMBINERS = {"add": "sum", "maximum": "max", "minimum": "min"}
#: Why a padded bag of ``jnp.take(..., mode="fill", fill_value=0)`` rows stays in XLA when
#: masked-bag-to-segments did not take it (its weights are not provably finite).
ZERO_FILL_BAG = ("a padded bag of zero-filled rows (jnp.take(mode='fill', fill_value=0)) times "
                 "weights not provably finite: the padded-bag kernels have no zero fill row "
                 "(out-of-range lookups add 0*w, NaN for an Inf/NaN weight)")


def combiner_name(opcode: str | None, where: str) -> str:
    if opcode not in _COMBINERS:
        raise NoMatch(f"{where} combines with {opcode or 'a non-trivial computation'}, "
                      "not add/maximum/minimum")
    return _COMBINERS[opcode]


def _keeps_lookup_order(op, n_lookups: int) -> bool:
    """True if ``op`` moves one-value-per-lookup data without reordering it."""
    if not op.operands:
        return False
    src, dst = op.operands[0].type, op.result.type
    if src.size != n_lookups:
        return False
    if op.opcode in ("reshape", "bitcast"):
        return True
    if op.opcode == "broadcast":
        dims = op.attributes.get("dimensions", [])
        return dims == list(range(src.rank)) and tuple(dst.dims[:src.rank]) == src.dims
    if op.opcode == "slice":
        return all(d.get("start", 0) == 0 and d.get("stride", 1) == 1 and d.get("limit", 0) == n
                   for d, n in zip(op.attributes.get("slice_dimensions", []), src.dims,
                                   strict=True))
    return False


def weights_chain(walk: Walk, ref: Ref, n_lookups: int) -> Ref:
    """From the broadcast weights multiplying the rows back to a value holding one weight per
    lookup, through reshapes/broadcasts/full slices that keep the lookup order."""
    while ref.top and walk.can_take(ref) and _keeps_lookup_order(ref.op, n_lookups):
        walk.take(ref)
        ref = Ref(ref.op.operands[0])
    if not ref.top:
        raise NoMatch("the weights are computed inside a called computation")
    if ref.value.type.size != n_lookups:
        src = ref.op.operands[0].type if ref.op.opcode == "broadcast" and ref.op.operands \
            else None
        if src is not None and 1 < src.size < n_lookups:
            raise NoMatch(f"weights {ref.op.name} broadcast {src.to_text(False)} to "
                          f"{ref.value.type.to_text(False)}: shared by several lookups (as "
                          "one weight per bag, w[:, None, None]), not one per lookup: "
                          "XLA:CPU factors such a weight out of the sum, an order the "
                          "kernels' per-lookup weights do not reproduce")
        raise NoMatch(f"weights {ref.op.name} {ref.value.type} are not one per lookup")
    return ref


def split_weighted(walk: Walk, ref: Ref, n_lookups: int) -> tuple[Ref, Ref | None]:
    """``multiply(rows, broadcast(w))`` -> (rows, w); anything else -> (ref, None)."""
    if ref.top and ref.op.opcode != "multiply":
        return ref, None
    ref = walk.enter(ref)
    if ref.op.opcode != "multiply":
        return ref, None
    a, b = Ref(ref.op.operands[0], ref.stack), Ref(ref.op.operands[1], ref.stack)
    for rows, w in ((a, b), (b, a)):
        if w.op.opcode == "broadcast" or w.op.opcode == "reshape":
            probe = resolve(rows)
            if probe.op.opcode in ("gather", "select", "call"):
                walk.take(ref)
                return rows, weights_chain(walk, w, n_lookups)
    for rows in (a, b):
        quantized = _integer_rows(rows)
        if quantized is not None:
            raise NoMatch(f"multiply {ref.op.name} scales {quantized_reason(quantized)}")
    raise NoMatch(f"multiply {ref.op.name} is not rows times broadcast per-lookup weights")


def _integer_rows(rows: Ref) -> str | None:
    """The integer element type (``s8``, ``u8`` ...) of a quantized table whose looked-up rows
    were converted to floats to give ``rows``, or None."""
    probe = resolve(rows)
    if probe.op.opcode != "convert" or not probe.op.operands:
        return None
    return quantized_rows(probe.op.operands[0].owner)


def lookup_of(walk: Walk, rows: Ref) -> Lookup:
    lk = match_lookup(walk, rows)
    if lk.table.value.type.rank != 2:  # a gather XLA's shape inference would refuse
        raise NoMatch(f"table {lk.table.value.type} is not a [rows, dim] matrix")
    return lk


def make_cluster(pattern: Any, walk: Walk, lk: Lookup, layout: list[tuple[str, Ref]],
                 weights: Ref | None, combiner: str, init: float) -> Cluster:
    """The cluster of a matched lookup + reduction: kernel operands are the table, the raw
    indices, the pattern's ``layout`` operands (segment ids ...) and the weights if any."""
    roles = ["table", layout[0][0]] + [r for r, _ in layout[1:]]
    inputs = [lk.table.value, lk.indices.value] + [ref.value for _, ref in layout[1:]]
    if weights is not None:
        roles.append("weights")
        inputs.append(weights.value)
    attrs = {"combiner": combiner, "index_mode": lk.index_mode,
             "wrap_negative": lk.wrap_negative, "weighted": weights is not None,
             "init": init, "index_bits": lk.index_bits}
    return Cluster(pattern.kind, pattern.name, walk.root, walk.owned, inputs, roles, attrs)


def one_row_fold(scatter: Any, what: str) -> str:
    """Why a scatter-add of exactly one row into zeros stays in XLA (``what``: the cluster, the
    gradient). Measured (f32, f16): XLA:CPU folds it into a copy of the row, so a -0.0 stays
    -0.0 where a kernel's 0 + (-0.0) is +0.0."""
    return (f"scatter {scatter.name} adds one row to zeros: XLA:CPU folds it into a copy (a "
            f"-0.0 stays -0.0), so {what} stays in XLA")


def folded_into_add(scatter: Any, what: str) -> str | None:
    """Why ``scatter`` (a scatter-add into +0) must not be summed from +0 by a kernel because
    XLA:CPU folds its one user ``A + scatter`` into ``scatter-add(A, ids, rows)``
    (patterns/scatter_fold.py: each row's updates added onto A one by one), or None when XLA
    does not fold it (``what``: the cluster, the gradient). A fold ``ScatterFold`` can rewrite
    is taken by it first (as ``ember.ordered_scatter``); the reason then names it."""
    d = fold_decision(scatter)
    if d is None:
        return None
    if isinstance(d, Fold):
        return (f"scatter {scatter.name}'s only user {d.add.name} adds it to "
                f"{d.other.owner.opcode} {d.other.owner.name}: XLA:CPU folds A + scatter-add(0, "
                "ids, rows) into scatter-add(A, ids, rows), which only ember.ordered_scatter "
                f"(not in these patterns) computes, so {what} stays in XLA")
    return f"{d}; {what} is not summed from +0"
