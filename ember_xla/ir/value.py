"""SSA values: the result of an operation (or a graph argument), with the list of its users."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ember_xla.ir.operation import Operation


class Value:
    """One SSA value. ``type`` is dialect-defined (for HLO a ``Shape``)."""

    __slots__ = ("type", "owner", "index", "uses")

    def __init__(self, type_: Any, owner: Operation | None = None, index: int = 0) -> None:
        self.type = type_
        self.owner = owner
        self.index = index
        # (user operation, operand position) pairs, in the order the uses were made.
        self.uses: list[tuple[Operation, int]] = []

    @property
    def users(self) -> list[Operation]:
        """Distinct users in first-use order."""
        seen: dict[int, Operation] = {}
        for op, _ in self.uses:
            seen.setdefault(id(op), op)
        return list(seen.values())

    def replace_all_uses_with(self, other: Value) -> None:
        """Make every user read ``other`` instead of this value."""
        if other is self:
            return
        for op, pos in list(self.uses):
            op.set_operand(pos, other)

    def __repr__(self) -> str:
        name = self.owner.name if self.owner is not None else "?"
        return f"<Value {name}#{self.index}: {self.type}>"
