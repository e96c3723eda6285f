"""Pattern rewriting: rewrite patterns, a block-aware rewriter through which every edit goes,
a greedy driver that visits nested regions, and dead-code removal. ``recording_replacements``
lists every (old, new) value pair the rewriters replace while it is active (what a checker
compares)."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Sequence

from ember_xla.ir.block import Block
from ember_xla.ir.graph import Graph, Module
from ember_xla.ir.operation import Operation
from ember_xla.ir.value import Value

_REPLACED: contextvars.ContextVar[list[tuple[Value, Value]] | None] = contextvars.ContextVar(
    "ember_replaced_values", default=None)


@contextlib.contextmanager
def recording_replacements() -> Iterator[list[tuple[Value, Value]]]:
    """Collect the (old, new) pairs of every ``replace_all_uses`` made inside the block that
    moved a use or a graph's root, in order (block arguments too)."""
    sink: list[tuple[Value, Value]] = []
    token = _REPLACED.set(sink)
    try:
        yield sink
    finally:
        _REPLACED.reset(token)


class PatternRewriter:
    """The edits a pattern may make; records whether anything changed (``changed``) and how
    many edits were made (``edits``). Edits apply to the block each anchor op sits in."""

    def __init__(self, graph: Block | None = None) -> None:
        self.graph = graph  # kept for callers that rewrite one HLO graph
        self.edits = 0

    @property
    def changed(self) -> bool:
        return self.edits > 0

    def _note(self) -> None:
        self.edits += 1

    # -- insertion --------------------------------------------------------------------------
    def insert_before(self, anchor: Operation, op: Operation) -> Operation:
        self._note()
        return _block_of(anchor).insert_before(anchor, op)

    def insert_after(self, anchor: Operation, op: Operation) -> Operation:
        self._note()
        return _block_of(anchor).insert_after(anchor, op)

    def append(self, block: Block, op: Operation) -> Operation:
        self._note()
        return block.append(op)

    def clone(self, op: Operation, operands: list[Value], before: Operation) -> Operation:
        return self.insert_before(before, op.clone(operands))

    def move_before(self, op: Operation, anchor: Operation) -> None:
        self._note()
        _block_of(op).detach(op)
        _block_of(anchor).insert_before(anchor, op)

    def sort_topologically(self, graph: Graph) -> None:
        """Reorder ``graph``'s ops so every op follows its operands (stable)."""
        order = graph.topological()
        if any(a is not b for a, b in zip(order, graph.ops, strict=True)):
            self._note()
            graph.reorder(order)

    def move_after(self, op: Operation, anchor: Operation) -> None:
        self._note()
        _block_of(op).detach(op)
        _block_of(anchor).insert_after(anchor, op)

    # -- replacement ------------------------------------------------------------------------
    def replace_all_uses(self, old: Value, new: Value) -> None:
        g = old.owner.parent if isinstance(old.owner, Operation) else None
        root = (isinstance(g, Graph) and g.root is old.owner
                and isinstance(new.owner, Operation))
        sink = _REPLACED.get()
        if sink is not None and old is not new and (old.uses or root):
            sink.append((old, new))
        if old.uses:
            self._note()
        old.replace_all_uses_with(new)
        if root:
            assert isinstance(g, Graph) and isinstance(new.owner, Operation)
            g.root = new.owner
            self._note()

    def replace_op(self, op: Operation, new: Value | Sequence[Value] | Operation) -> None:
        """Replace ``op``'s results by ``new`` (a value, values, or another op's results) and
        erase ``op``."""
        if isinstance(new, Operation):
            values: Sequence[Value] = new.results
        elif isinstance(new, Value):
            values = [new]
        else:
            values = list(new)
        if len(values) != len(op.results):
            raise ValueError(f"{op.opcode} has {len(op.results)} results, "
                             f"{len(values)} replacements given")
        for old, v in zip(op.results, values, strict=True):
            self.replace_all_uses(old, v)
        self.erase(op)

    def erase(self, op: Operation) -> None:
        self._note()
        _block_of(op).erase(op)

    def inline_block_before(self, block: Block, anchor: Operation,
                            args: Sequence[Value] = ()) -> None:
        """Move ``block``'s ops before ``anchor``, its arguments replaced by ``args``."""
        for a, v in zip(block.args, args, strict=True):
            self.replace_all_uses(a, v)
        for op in list(block.ops):
            block.detach(op)
            self.insert_before(anchor, op)

    def set_operand(self, op: Operation, pos: int, v: Value) -> None:
        self._note()
        op.set_operand(pos, v)

    def set_attribute(self, op: Operation, key: str, value: object) -> None:
        if op.attributes.get(key, object()) != value:
            self._note()
            op.attributes[key] = value


def _block_of(op: Operation) -> Block:
    if op.parent is None:
        raise ValueError(f"{op.opcode} {op.name!r} is not in a block")
    return op.parent


class RewritePattern:
    """One rewrite: ``match_and_rewrite`` edits through the rewriter or leaves the op alone."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        raise NotImplementedError


def _attached(op: Operation, graphs: set[int]) -> bool:
    """Is ``op`` still (transitively) inside one of the module's graphs?"""
    b = op.parent
    while b is not None:
        if id(b) in graphs:
            return True
        parent = b.parent_op
        if parent is None:
            return False
        b = parent.parent
    return False


def _sweep(module: Module, patterns: Sequence[RewritePattern]) -> int:
    """One pass of ``patterns`` over every op (nested ones included); returns the edits."""
    edits = 0
    graphs = {id(g) for g in module.graphs}
    for graph in list(module.graphs):
        for op in list(graph.walk()):
            for pat in patterns:
                if not _attached(op, graphs):
                    break
                rw = PatternRewriter(op.parent)
                pat.match_and_rewrite(op, rw)
                edits += rw.edits
    return edits


def apply_patterns_greedily(
    module: Module, patterns: Sequence[RewritePattern], max_iterations: int = 16
) -> int:
    """Apply ``patterns`` until nothing changes; returns the number of sweeps."""
    for sweep in range(1, max_iterations + 1):
        if not _sweep(module, patterns):
            return sweep
    return max_iterations


def count_edits(module: Module, patterns: Sequence[RewritePattern],
                max_iterations: int = 16) -> int:
    """Like ``apply_patterns_greedily`` but returns the number of edits made (what a pass
    reports as changed)."""
    edits = 0
    for _ in range(max_iterations):
        n = _sweep(module, patterns)
        edits += n
        if not n:
            break
    return edits


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
