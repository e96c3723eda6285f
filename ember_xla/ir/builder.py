"""A builder that creates operations at an insertion point of a graph."""

from __future__ import annotations

from typing import Any

from ember_xla.ir.graph import Graph
from ember_xla.ir.operation import Operation
from ember_xla.ir.value import Value


class Builder:
    """Inserts new operations into ``graph`` before ``before`` (or at the end)."""

    def __init__(self, graph: Graph, before: Operation | None = None) -> None:
        self.graph = graph
        self.before = before

    def create(
        self,
        opcode: str,
        operands: list[Value],
        result_type: Any,
        attributes: dict[str, Any] | None = None,
        callees: list[Graph] | None = None,
        name: str = "",
    ) -> Operation:
        op = Operation(opcode, operands, [result_type], attributes, callees, name or opcode)
        if self.before is None:
            self.graph.append(op)
        else:
            self.graph.insert_before(self.before, op)
        return op

    def insert(self, op: Operation) -> Operation:
        if self.before is None:
            return self.graph.append(op)
        return self.graph.insert_before(self.before, op)
