"""What a rowwise Adagrad update needs beyond the other fused optimizers (rewrites/
fuse_optimizer.py matches the update itself): reading a per-row value through the reshapes and
broadcasts that spread it over a row, and whether the kernel's row-wise mean of ``g * g``
is XLA:CPU's for the gradient's shape on this machine."""

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


def row_chain(v: Value, stop: Value) -> list[Operation]:
    """The reshapes and broadcasts from ``stop`` up to ``v`` (``row_value`` checked them)."""
    ops = []
    while v is not stop:
        ops.append(v.owner)
        v = v.owner.operands[0]
    return ops


def rowwise_refused(gcall: Operation) -> str | None:
    """Why a rowwise Adagrad update of this gradient cannot be fused here, or None: its
    ``mean(g * g, axis=1)`` must be computed in XLA:CPU's order (native/row_mean_probe.py)."""
    from ember_xla.native.row_mean_probe import row_mean_matches_xla

    v, d = gcall.result.type.dims
    if row_mean_matches_xla(v, d):
        return None
    return (f"rowwise_adagrad: the kernel's order of the row-wise mean of g * g over D = {d} "
            f"is not XLA:CPU's for a [{v}, {d}] gradient on this machine, so the update stays "
            "in XLA")
