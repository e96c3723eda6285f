"""Graphs (a named top-level block with a root: an HLO computation, or a function of the Ember
levels with block arguments) and modules (named graphs with an entry: the symbol table)."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ember_xla.ir.block import Block
from ember_xla.ir.operation import Operation
from ember_xla.ir.value import Value

_SUFFIX = re.compile(r"^(.*?)(?:\.(\d+))?$")


class Graph(Block):
    """A named top-level block. HLO computations hold ``parameter`` ops and no block arguments,
    and ``root`` is the op whose value they return; functions of the Ember levels take block
    arguments and end in a terminator. Op names are kept unique inside a graph."""

    def __init__(self, name: str, attributes: dict[str, Any] | None = None,
                 arg_types: list[Any] | tuple[Any, ...] = ()) -> None:
        super().__init__(arg_types)
        self.name = name
        self.root: Operation | None = None
        self.attributes: dict[str, Any] = dict(attributes or {})
        self.id: int | None = None
        self._names: set[str] = set()

    # -- names ------------------------------------------------------------------------------
    def unique_name(self, base: str) -> str:
        if base and base not in self._names:
            return base
        stem = _SUFFIX.match(base or "v").group(1) or "v"
        n = 1
        while f"{stem}.{n}" in self._names:
            n += 1
        return f"{stem}.{n}"

    def rename(self, op: Operation, new: str) -> None:
        if new in self._names:
            raise ValueError(f"graph {self.name} already has an op named {new}")
        self._names.discard(op.name)
        self._names.add(new)
        op.name = new

    # -- mutation ---------------------------------------------------------------------------
    def insert(self, index: int, op: Operation) -> Operation:
        if op.parent is not None:
            where = getattr(op.parent, "name", "a block")
            raise ValueError(f"{op.name} already belongs to {where}")
        if op.name:  # unnamed ops (Ember levels) stay unnamed: printers number them
            op.name = self.unique_name(op.name)
            self._names.add(op.name)
        op.parent = self
        self.ops.insert(index, op)
        return op

    def reorder(self, order: list[Operation]) -> None:
        """Put this graph's ops in ``order`` (a permutation of them)."""
        if len(order) != len(self.ops) or {id(o) for o in order} != {id(o) for o in self.ops}:
            raise ValueError(f"reorder of {self.name}: not a permutation of its ops")
        self.ops[:] = order

    def detach(self, op: Operation) -> Operation:
        if op is self.root:
            raise ValueError(f"cannot remove {op.name}: it is the root of {self.name}")
        super().detach(op)
        self._names.discard(op.name)
        return op

    def clone_into(self, other: Graph, graph_map: dict[int, Graph],
                   vmap: dict[Value, Value] | None = None) -> None:
        """Copy this graph's arguments, ops (names and ids kept, callees through
        ``graph_map``), root and attributes into the empty graph ``other``."""
        vmap = {} if vmap is None else vmap
        for a in self.args:
            vmap[a] = other.add_arg(a.type, a.name_hint)
        for op in self.ops:
            new = op.clone(value_map=vmap)
            new.callees = [graph_map.get(id(c), c) for c in op.callees]
            new.id = op.id
            other.append(new)
            if op is self.root:
                other.root = new
        other.id = self.id
        other.attributes = copy.deepcopy(self.attributes)

    # -- queries ----------------------------------------------------------------------------
    def params(self) -> list[Operation]:
        return [op for op in self.ops if op.opcode == "parameter"]

    def topological(self) -> list[Operation]:
        """Operations in an order where every op follows its operands (stable)."""
        # Usually the ops already are in such an order, and then the walk below returns them
        # as they are: check that in one pass first.
        seen: set[Operation] = set()  # operations hash by identity
        add = seen.add
        for op in self.ops:
            for v in op.operands:
                dep = v.owner
                if dep not in seen and dep is not None and dep.parent is self:
                    break
            else:
                if op in seen:
                    break
                add(op)
                continue
            break
        else:
            return list(self.ops)
        placed: set[int] = set()
        order: list[Operation] = []
        for start in self.ops:
            stack: list[tuple[Operation, int]] = [(start, 0)]
            while stack:
                op, i = stack.pop()
                if id(op) in placed:
                    continue
                if i < len(op.operands):
                    stack.append((op, i + 1))
                    dep = op.operands[i].owner
                    if dep is not None and id(dep) not in placed and dep.parent is self:
                        stack.append((dep, 0))
                    continue
                placed.add(id(op))
                order.append(op)
        return order

    def __repr__(self) -> str:
        return f"<Graph {self.name}: {len(self.ops)} ops>"


class Module:
    """Named graphs; ``entry`` is the one that is run. ``attributes`` hold module-level data."""

    def __init__(self, name: str, attributes: dict[str, Any] | None = None) -> None:
        self.name = name
        self.graphs: list[Graph] = []
        self.entry: Graph | None = None
        self.attributes: dict[str, Any] = dict(attributes or {})

    def add(self, graph: Graph, entry: bool = False, before: Graph | None = None) -> Graph:
        """Add ``graph`` (at the end, or just before ``before``)."""
        if any(g.name == graph.name for g in self.graphs):
            raise ValueError(f"module {self.name} already has a graph named {graph.name}")
        if before is None:
            self.graphs.append(graph)
        else:
            self.graphs.insert(self.graphs.index(before), graph)
        if entry:
            self.entry = graph
        return graph

    def donated_parameters(self) -> set[int]:
        """The entry parameters the caller lets XLA overwrite (the ``input_output_alias`` and
        ``buffer_donor`` entries): a run may consume their buffers."""
        return {int(e.get("parameter_number", 0))
                for key in ("input_output_alias", "buffer_donor")
                for e in self.attributes.get(key, {}).get("entries", [])}

    def clone(self) -> Module:
        """A deep copy: names, ids, attributes and graph order kept; nothing shared."""
        new = Module(self.name, copy.deepcopy(self.attributes))
        graph_map: dict[int, Graph] = {}
        for g in self.graphs:
            graph_map[id(g)] = Graph(g.name)
        for g in self.graphs:
            g.clone_into(graph_map[id(g)], graph_map)
            new.add(graph_map[id(g)], entry=g is self.entry)
        return new

    def graph(self, name: str) -> Graph:
        for g in self.graphs:
            if g.name == name:
                return g
        raise KeyError(f"module {self.name} has no graph named {name}")

    def unique_graph_name(self, base: str) -> str:
        names = {g.name for g in self.graphs}
        if base not in names:
            return base
        stem = _SUFFIX.match(base).group(1) or base
        n = 1
        while f"{stem}.{n}" in names:
            n += 1
        return f"{stem}.{n}"

    def post_order(self) -> list[Graph]:
        """Graphs with every callee before its callers, in the module's order where it allows
        (as XLA orders them: a graph nothing calls keeps its place, even after the entry)."""
        seen: set[int] = set()
        out: list[Graph] = []

        def visit(g: Graph) -> None:
            if id(g) in seen:
                return
            seen.add(id(g))
            for op in g.ops:
                for c in op.callees:
                    visit(c)
            out.append(g)

        for g in self.graphs:
            visit(g)
        return out

    def uniquify_op_names(self) -> int:
        """Rename ops so names are unique module-wide (XLA requires it); returns renames. The
        entry computation keeps its names (its parameters are the module's interface: a
        caller gives inputs by those names), other computations yield."""
        taken: set[str] = set()
        renamed = 0
        order = ([self.entry] if self.entry is not None else []) + [
            g for g in self.graphs if g is not self.entry]
        for g in order:
            for op in g.ops:
                if op.name not in taken:
                    taken.add(op.name)
                    continue
                stem = _SUFFIX.match(op.name).group(1) or op.opcode
                n = 1
                while f"{stem}.{n}" in taken or f"{stem}.{n}" in g._names:
                    n += 1
                old = op.name
                g.rename(op, f"{stem}.{n}")
                taken.add(op.name)
                for other in g.ops:
                    preds = other.attributes.get("control_predecessors")
                    if preds and old in preds:
                        other.attributes["control_predecessors"] = [
                            op.name if p == old else p for p in preds]
                renamed += 1
        return renamed

    def walk(self) -> Iterator[Operation]:
        """Every op of every graph, nested ops included (pre-order)."""
        for g in self.graphs:
            yield from g.walk()

    @staticmethod
    def reachable(roots: Iterable[Graph],
                  through: Callable[[Operation], bool] = lambda op: True) -> set[int]:
        """Ids of ``roots`` and of every graph they call, transitively, stepping only into the
        callees of ops ``through`` accepts."""
        reach: set[int] = set()
        stack = list(roots)
        while stack:
            g = stack.pop()
            if id(g) in reach:
                continue
            reach.add(id(g))
            stack.extend(c for op in g.ops if through(op) for c in op.callees)
        return reach

    def remove_unreachable_graphs(self) -> int:
        """Drop graphs no longer called from the entry; returns how many were removed."""
        if self.entry is None:
            return 0
        reach = self.reachable([self.entry])
        before = len(self.graphs)
        self.graphs = [g for g in self.graphs if id(g) in reach]
        return before - len(self.graphs)
