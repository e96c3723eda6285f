"""SSA values: an operation's result (``OpResult``) or a block's argument (``BlockArgument``),
each with the list of its uses."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ember_xla.ir.block import Block
    from ember_xla.ir.operation import Operation


class Value:
    """One SSA value. ``type`` is dialect-defined (for HLO a ``Shape``, for the Ember levels an
    ``ir.types`` type). ``owner`` is the defining operation (``OpResult``) or block
    (``BlockArgument``); ``index`` the position among the owner's results or arguments."""

    __slots__ = ("type", "owner", "index", "uses", "name_hint")

    def __init__(self, type_: Any, owner: Any = None, index: int = 0) -> None:
        self.type = type_
        self.owner = owner
        self.index = index
        # (user operation, operand position) pairs, in the order the uses were made.
        self.uses: list[tuple[Operation, int]] = []
        self.name_hint: str | None = None

    @property
    def users(self) -> list[Operation]:
        """Distinct users in first-use order."""
        seen: dict[int, Operation] = {}
        for op, _ in self.uses:
            seen.setdefault(id(op), op)
        return list(seen.values())

    @property
    def defining_block(self) -> Block | None:
        """The block whose scope the value is defined in."""
        raise NotImplementedError

    def replace_all_uses_with(self, other: Value) -> None:
        """Make every user read ``other`` instead of this value."""
        if other is self:
            return
        for op, pos in list(self.uses):
            op.set_operand(pos, other)

    def __repr__(self) -> str:
        name = getattr(self.owner, "name", None) or "?"
        return f"<{type(self).__name__} {name}#{self.index}: {self.type}>"


class OpResult(Value):
    """Result ``index`` of operation ``owner``."""

    __slots__ = ()

    @property
    def op(self) -> Operation:
        return self.owner

    @property
    def defining_block(self) -> Block | None:
        return self.owner.parent


class BlockArgument(Value):
    """Argument ``index`` of block ``owner`` (a loop's induction variable, a function's
    parameter)."""

    __slots__ = ()

    @property
    def block(self) -> Block:
        return self.owner

    @property
    def defining_block(self) -> Block | None:
        return self.owner
