"""Operations: a name (opcode), operands, typed results, attributes and called graphs."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from ember_xla.ir.value import Value

if TYPE_CHECKING:
    from ember_xla.ir.graph import Graph


class Operation:
    """A generic operation.

    ``opcode`` names what it does (``"add"``, ``"gather"`` ...), ``name`` is its unique SSA name
    inside its graph, ``attributes`` maps attribute names to plain Python values and ``callees``
    lists the graphs it calls, in order (HLO's ``to_apply``, ``calls``, branches ...).
    """

    def __init__(
        self,
        opcode: str,
        operands: list[Value],
        result_types: list[Any],
        attributes: dict[str, Any] | None = None,
        callees: list[Graph] | None = None,
        name: str = "",
    ) -> None:
        self.opcode = opcode
        self.name = name
        self.attributes: dict[str, Any] = dict(attributes or {})
        self.callees: list[Graph] = list(callees or [])
        self.results = [Value(t, self, i) for i, t in enumerate(result_types)]
        self.operands: list[Value] = []
        self.parent: Graph | None = None
        self.id: int | None = None
        ops = self.operands
        for v in operands:  # _append_operand, inlined
            if not isinstance(v, Value):
                raise TypeError(
                    f"operand of {self.opcode} must be a Value, got {type(v).__name__}")
            v.uses.append((self, len(ops)))
            ops.append(v)

    # -- operands ---------------------------------------------------------------------------
    def _append_operand(self, v: Value) -> None:
        if not isinstance(v, Value):
            raise TypeError(f"operand of {self.opcode} must be a Value, got {type(v).__name__}")
        v.uses.append((self, len(self.operands)))
        self.operands.append(v)

    def set_operand(self, pos: int, v: Value) -> None:
        old = self.operands[pos]
        old.uses.remove((self, pos))
        v.uses.append((self, pos))
        self.operands[pos] = v

    def drop_operands(self) -> None:
        """Forget all operands (removing this op from their use lists)."""
        for pos, v in enumerate(self.operands):
            v.uses.remove((self, pos))
        self.operands = []

    # -- results ----------------------------------------------------------------------------
    @property
    def result(self) -> Value:
        if len(self.results) != 1:
            raise ValueError(f"{self.opcode} has {len(self.results)} results, not one")
        return self.results[0]

    @property
    def users(self) -> list[Operation]:
        out: dict[int, Operation] = {}
        for r in self.results:
            for u in r.users:
                out.setdefault(id(u), u)
        return list(out.values())

    def clone(self, operands: list[Value]) -> Operation:
        """A detached copy reading ``operands``; attributes are deep-copied."""
        op = Operation(
            self.opcode,
            operands,
            [r.type for r in self.results],
            copy.deepcopy(self.attributes),
            list(self.callees),
            self.name,
        )
        return op

    def __repr__(self) -> str:
        ins = ", ".join(v.owner.name if v.owner else "?" for v in self.operands)
        return f"<Operation {self.name} = {self.opcode}({ins})>"
