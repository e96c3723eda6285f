"""Pattern rewriting: rewrite patterns, a rewriter that edits graphs safely, a greedy driver
and dead-code removal."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ember_xla.ir.graph import Graph, Module
from ember_xla.ir.operation import Operation
from ember_xla.ir.value import Value


class PatternRewriter:
    """The edits a pattern may make; records whether anything changed."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.changed = False

    def insert_before(self, anchor: Operation, op: Operation) -> Operation:
        self.changed = True
        return self.graph.insert_before(anchor, op)

    def replace_all_uses(self, old: Value, new: Value) -> None:
        if old.uses:
            self.changed = True
        old.replace_all_uses_with(new)
        if self.graph.root is old.owner and new.owner is not None:
            self.graph.root = new.owner

    def replace_op(self, op: Operation, new: Value) -> None:
        """Replace ``op``'s single result by ``new`` and erase ``op``."""
        self.replace_all_uses(op.result, new)
        self.erase(op)

    def erase(self, op: Operation) -> None:
        self.changed = True
        self.graph.erase(op)

    def clone(self, op: Operation, operands: list[Value], before: Operation) -> Operation:
        return self.insert_before(before, op.clone(operands))


class RewritePattern:
    """One rewrite: ``match_and_rewrite`` edits through the rewriter or leaves the op alone."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        raise NotImplementedError


def apply_patterns_greedily(
    module: Module, patterns: Sequence[RewritePattern], max_iterations: int = 16
) -> int:
    """Apply ``patterns`` to every op until nothing changes; returns the number of sweeps."""
    for sweep in range(1, max_iterations + 1):
        changed = False
        for graph in list(module.graphs):
            for op in graph:
                if op.parent is not graph:
                    continue
                for pat in patterns:
                    rw = PatternRewriter(graph)
                    pat.match_and_rewrite(op, rw)
                    changed |= rw.changed
                    if op.parent is not graph:
                        break
        if not changed:
            return sweep
    return max_iterations


def remove_dead_code(
    graph: Graph, keep: Callable[[Operation], bool] = lambda op: op.opcode == "parameter"
) -> int:
    """Erase ops whose results are unused (except the root and ops ``keep`` protects)."""
    removed = 0
    for op in reversed(graph.topological()):
        if op is graph.root or keep(op) or op.users:
            continue
        graph.erase(op)
        removed += 1
    return removed
