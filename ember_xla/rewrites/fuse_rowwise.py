"""What a rowwise Adagrad update needs beyond the other fused optimizers (rewrites/
fuse_optimizer.py matches the update itself): reading a per-row value through the reshapes and
broadcasts that spread it over a row, and the order in which the kernel must sum the row-wise
mean of ``g * g`` to give XLA:CPU's bits for the gradient's shape."""

from __future__ import annotations

import math

from ember_xla.ir.operation import Operation
from ember_xla.ir.value import Value
from ember_xla.rewrites.walk import NoMatch


def row_value(v: Value, rows: int, where: str) -> Value:
    """The [V] value that ``v`` (of shape [V], [V, 1] or [V, D]) spreads over each row: through
    reshapes between [V] and [V, 1] and broadcasts that keep dimension 0 as the row."""
    while v.owner.opcode in ("reshape", "broadcast") and len(v.owner.operands) == 1:
        op, src = v.owner, v.owner.operands[0]
        if src.type.rank == 0 or not src.type.dims or src.type.dims[0] != rows:
            break
        if math.prod(src.type.dims) != rows:
            raise NoMatch(f"{where}: {op.name} spreads {src.type}, not one value per row")
        if op.opcode == "broadcast" and list(op.attributes.get("dimensions", []))[:1] != [0]:
            raise NoMatch(f"{where}: {op.name} does not keep the row as dimension 0")
        v = src
    if v.type.dims != (rows,) and v.type.dims != (rows, 1):
        raise NoMatch(f"{where} is {v.owner.opcode} {v.owner.name} {v.type}, not one value per "
                      "row")
    return v


def row_user(v: Value, rows: int) -> tuple[Value, list[Operation]]:
    """From a [V] or [V, 1] value through its single-user reshapes between [V] and [V, 1]
    (``jnp.mean(..., keepdims=True)``): the last value and the reshapes passed."""
    chain = []
    while (len(v.owner.users) == 1 and v.owner.users[0].opcode == "reshape"
           and v.owner.users[0].result.type.dims in ((rows,), (rows, 1))):
        chain.append(v.owner.users[0])
        v = chain[-1].result
    return v, chain


def row_chain(v: Value, stop: Value) -> list[Operation]:
    """The reshapes and broadcasts from ``stop`` up to ``v`` (``row_value`` checked them)."""
    ops = []
    while v is not stop:
        ops.append(v.owner)
        v = v.owner.operands[0]
    return ops


def rowwise_sum_order(gcall: Operation) -> tuple[str | None, str | None]:
    """(the kernel's ``sum_order`` for the rowwise Adagrad update of this gradient, None) or
    (None, why it cannot be fused): its ``mean(g * g, axis=1)`` must be summed in XLA:CPU's
    order (native/row_mean_order.py, a static rule)."""
    from ember_xla.native.row_mean_order import OrderNotReproduced, row_mean_order

    v, d = gcall.result.type.dims
    if d == 1:
        return None, ("rowwise_adagrad: a [V, 1] table's update differs from XLA:CPU's "
                      "(measured at V = 60 and 5000; the mean of one square is exact, so the "
                      "difference is in the update, where XLA has no row broadcast to turn "
                      "the divide by sqrt(a) + eps into the kernel's reciprocal multiply), so "
                      "the update stays in XLA")
    try:
        return row_mean_order(v, d), None
    except OrderNotReproduced as e:
        return None, f"rowwise_adagrad: {e}, so the update stays in XLA"
