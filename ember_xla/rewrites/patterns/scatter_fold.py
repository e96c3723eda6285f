"""XLA:CPU's fold of ``A + scatter-add(0, ids, rows)`` into ``scatter-add(A, ids, rows)``, and
the ``ember.ordered_scatter`` cluster that computes exactly that.

XLA's algebraic simplifier (``HandleAdd``, before layout assignment) rewrites an ``add`` one of
whose operands is a scatter with one use and an ``add(parameter, parameter)`` combiner: the
scatter's operand becomes ``A + operand`` (``A + 0`` then simplifies to ``A``) and the add is
replaced by the scatter. Each row's updates are then added onto A one by one, in index order
(a GNN residual ``h + segment_sum(...)``, GIN's ``(1 + eps) * h + ...``, optax momentum's
``g + 0.9 * m``, a tied table's ``dense_grad + scatter-add``). When both operands of the add
are such scatters (or adds that fold into one), XLA concatenates their indices and updates
into one scatter if that is cheap (fewer update elements than result elements); otherwise,
in the XLA of the pinned jaxlib (measured), it leaves the add alone. Post order: an add's
operands are simplified first, so an add whose operand folded into a scatter sees a scatter.

``fold_decision`` replays that decision for one zero-initialised scatter-add and returns the
``Fold`` the ``ScatterFold`` pattern rewrites as ``ember.ordered_scatter(A, ids, rows)``
(combiner add: onto a copy of A, or in place when aliased; out-of-range ids dropped as
XLA's scatter drops them), the reason it stays in XLA, or None when XLA does not fold it
(the patterns that sum from +0 then apply)."""

from __future__ import annotations

import dataclasses
import math

from ember_xla.custom_calls import (
    ORDERED_SCATTER,
    SCATTER_GRAD,
    SEGMENT_REDUCE,
    call_attributes,
)
from ember_xla.hlo.shape import Shape
from ember_xla.ir.operation import Operation
from ember_xla.ir.value import Value
from ember_xla.rewrites.cluster import Cluster
from ember_xla.rewrites.matcher import Pattern
from ember_xla.rewrites.patterns.forward_lookup import (
    depends_on,
    forward_gather,
    permuted_gather,
)
from ember_xla.rewrites.patterns.sparse_apply import one_row_id_per_update, scatters_whole_rows
from ember_xla.rewrites.refs import Ref, binary_combiner, scalar_constant
from ember_xla.rewrites.walk import NoMatch

FOLD_NOTE = ("XLA:CPU folds A + scatter-add(0, ids, rows) into scatter-add(A, ids, rows): "
             "each row added onto A one by one, in index order")


@dataclasses.dataclass(frozen=True)
class Fold:
    scatter: Operation   # the zero-initialised scatter-add
    add: Operation       # its only user, which XLA replaces by scatter-add(A, ids, rows)
    other: Value         # A


def _adds_params(op: Operation) -> bool:
    """XLA's test of a scatter's combiner: its root is ``add(parameter, parameter)``."""
    if len(op.callees) != 1:
        return False
    root = op.callees[0].root
    return (root.opcode == "add" and len(root.operands) == 2
            and all(v.owner.opcode == "parameter" for v in root.operands))


def _one_use(v: Value) -> bool:
    return len(v.uses) == 1


def _zero_call(op: Operation) -> bool:
    """An ember call that replaced a scatter-add (a lookup's gradient, a segment sum from 0, an
    ordered scatter): XLA saw a scatter there."""
    target = op.attributes.get("custom_call_target")
    if target in (SCATTER_GRAD.name, ORDERED_SCATTER.name):
        return True
    if target == SEGMENT_REDUCE.name:
        attrs = call_attributes(op)
        return attrs.get("combiner") == "sum" and float(attrs.get("init", 1.0)) == 0.0
    return False


def _update_elements(v: Value) -> int | None:
    """How many update elements the scatter ``v`` is (or folds into) applies; None: unknown."""
    op = v.owner
    if op.opcode == "scatter" and len(op.operands) == 3:
        return op.operands[2].type.size
    if op.opcode == "add":
        parts = [_update_elements(x) for x in op.operands if _becomes_scatter(x)]
        return None if any(p is None for p in parts) else sum(parts)  # type: ignore[misc]
    return None


def _becomes_scatter(v: Value) -> bool:
    """Is ``v``, once XLA's simplifier has visited it, a scatter with an add combiner and one
    use (what ``HandleAdd`` folds into its user)?"""
    if not _one_use(v):
        return False
    op = v.owner
    if op.opcode == "scatter":
        return len(op.operands) == 3 and _adds_params(op)
    if op.opcode == "custom-call":
        return _zero_call(op)
    if op.opcode == "add":
        return add_outcome(op) in ("fold", "concat")
    return False


def add_outcome(add: Operation) -> str:
    """What XLA's ``HandleAdd`` makes of ``add``: ``fold`` (one operand is a foldable scatter:
    the add becomes that scatter onto the other operand), ``concat`` (both are, and their
    updates together are fewer elements than the result: one scatter of both, or the sizes
    are unknown), ``none`` (both, not cheap: left alone) or ``plain`` (no scatter operand)."""
    if len(add.operands) != 2 or add.operands[0] is add.operands[1]:
        return "plain"
    lhs, rhs = (_becomes_scatter(v) for v in add.operands)
    if lhs and rhs:
        parts = [_update_elements(v) for v in add.operands]
        if any(p is None for p in parts) or sum(parts) < add.result.type.size:  # type: ignore
            return "concat"
        return "none"
    return "fold" if lhs or rhs else "plain"


def _rows_reason(op: Operation) -> str | None:
    """Why ``ember.ordered_scatter`` cannot compute scatter ``op`` onto A, or None."""
    dest, ids, upd = op.operands
    types = {dest.type.element_type, upd.type.element_type, op.result.type.element_type}
    if types != {"f32"}:
        return f"the scatter is {'/'.join(sorted(types))}: ember.ordered_scatter is f32 only"
    if binary_combiner(op) != "add":
        return "the scatter's combiner is not add(existing, update)"
    if op.result.type.rank != 2 or not scatters_whole_rows(op):
        return f"the scatter does not add whole rows of a [V, D] result ({op.result.type})"
    if not one_row_id_per_update(op):
        return f"the scatter's indices {ids.type} are not one s32/s64 row id per update row"
    if math.prod(upd.type.dims[:-1]) == 1:
        return ("the scatter adds one row: XLA:CPU may turn it into a dynamic-update-slice "
                "first, which clamps the id where a scatter drops it")
    return None


def _refusal(scatter: Operation, add: Operation, why: str) -> str:
    return (f"scatter {scatter.name}'s only user {add.name} adds it to a dense value, and "
            f"XLA:CPU folds A + scatter-add(0, ids, rows) into scatter-add(A, ids, rows); {why}: "
            "it stays in XLA")


def fold_decision(scatter: Operation) -> Fold | str | None:
    """The fold XLA makes of zero-initialised scatter-add ``scatter`` that ``ScatterFold``
    rewrites, the reason it stays in XLA, or None when XLA does not fold it into an add."""
    if (len(scatter.operands) != 3 or not _adds_params(scatter)
            or not _one_use(scatter.result)):
        return None
    add = scatter.result.users[0]
    if add.opcode != "add":
        return None
    zero = scalar_constant(Ref(scatter.operands[0]))
    if zero is None or zero != 0.0:
        return None
    if scatter.parent is not None and scatter is scatter.parent.root:
        return _refusal(scatter, add, "the scatter is also its computation's result")
    outcome = add_outcome(add)
    if outcome == "none":
        return None  # measured: two scatters too large to concatenate stay apart
    if outcome == "concat":
        return (f"scatter {scatter.name}'s only user {add.name} adds it to another "
                "scatter-add (two lookups' gradients of one table, two segment sums): XLA:CPU "
                "concatenates both into one scatter-add from 0 when their updates are fewer "
                "elements than the result, adding one row's updates of both in one sequence: "
                "it stays in XLA")
    other = add.operands[1] if add.operands[0] is scatter.result else add.operands[0]
    if scalar_constant(Ref(other)) is not None:
        return _refusal(scatter, add, f"A ({other.owner.name}) is a constant, which XLA "
                        "simplifies first")
    if _one_use(add.result):
        outer = add.result.users[0]
        if outer.opcode == "add" and add_outcome(outer) != "none":
            return _refusal(scatter, add, f"the sum is added again ({outer.name}), which XLA "
                            "folds into the same scatter")
    why = _rows_reason(scatter)
    if why is not None:
        return _refusal(scatter, add, why)
    return Fold(scatter, add, other)


def fold_cluster(fold: Fold) -> Cluster:
    """The ``ember.ordered_scatter`` cluster (combiner add) of ``fold``: {scatter, add} and the
    zero broadcast only the scatter reads; A, the ids and the rows computed by XLA as before."""
    s, add = fold.scatter, fold.add
    dest, ids, upd = s.operands
    owned = [add, s]
    if dest.owner.opcode == "broadcast" and dest.users == [s]:
        owned.append(dest.owner)
    n = math.prod(upd.type.dims[:-1])
    shapes = [fold.other.type, Shape.array(ids.type.element_type, (n,)),
              Shape.array("f32", (n, s.result.type.dims[1]))]
    dims = tuple(s.result.type.dims)
    fwd = forward_gather(ids, dims) or permuted_gather(ids, dims)
    backward = fwd is not None and not depends_on(fwd.operands[0], s)
    c = Cluster(ORDERED_SCATTER.kind, ORDERED_SCATTER.name, add, owned, [fold.other, ids, upd],
                list(ORDERED_SCATTER.operand_roles), {"combiner": "add"},
                direction="backward" if backward else "forward", kernel_shapes=shapes,
                table_value=fwd.operands[0] if backward else fold.other)
    c.notes.append(FOLD_NOTE + (f" (the transpose of the lookup {fwd.name})" if backward
                                else ""))
    return c


class ScatterFold(Pattern):
    """A zero-initialised scatter-add that XLA:CPU folds into the add using it."""

    name = ORDERED_SCATTER.name
    kind = ORDERED_SCATTER.kind
    roots = ("scatter",)
    quiet = True  # a refusal is reported by the pattern that would sum the rows from +0

    def match(self, op: Operation) -> Cluster:
        fold = fold_decision(op)
        if not isinstance(fold, Fold):
            raise NoMatch(fold or f"XLA:CPU does not fold scatter {op.name} into an add")
        return fold_cluster(fold)
