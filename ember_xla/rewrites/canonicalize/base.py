"""The shape of a canonicalization pass: a registered ``ModulePass`` that applies its
``RewritePattern``s greedily to every graph, then drops the pure ops its rewrites orphaned."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Iterator
from typing import ClassVar

from ember_xla.ir.graph import Module
from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import ModulePass
from ember_xla.ir.rewriter import (
    PatternRewriter,
    RewritePattern,
    apply_patterns_greedily,
    remove_dead_code,
)
from ember_xla.rewrites.compile_time import ConstantValues

# ops without side effects that a rewrite may leave unused (anything else is kept)
PURE = frozenset({
    "abs", "add", "and", "bitcast", "broadcast", "clamp", "compare", "concatenate",
    "constant", "convert", "copy", "divide", "dot", "gather", "iota", "maximum", "minimum",
    "multiply", "negate", "not", "or", "reduce", "remainder", "reshape", "scatter", "select",
    "slice", "subtract", "transpose", "xor", "call", "tuple", "get-tuple-element",
})


#: the compile-time values of the canonicalization under way (``one_canonicalization``)
_CONSTANT: contextvars.ContextVar[ConstantValues | None] = contextvars.ContextVar(
    "constant_values", default=None)


@contextlib.contextmanager
def one_canonicalization(shared: bool = True) -> Iterator[None]:
    """The pattern passes run inside share one ``ConstantValues`` (if ``shared``: only when no
    other pass runs between them), whose answers hold from one pass to the next until a pass
    edits the module; otherwise each pass makes its own."""
    token = _CONSTANT.set(ConstantValues() if shared else None)
    try:
        yield
    finally:
        _CONSTANT.reset(token)


def dead_ops(module: Module) -> set[Operation]:
    """Ops whose results nobody uses (the root aside)."""
    return {op for g in module.graphs for op in g.ops
            if op is not g.root and not any(r.uses for r in op.results)}


def drop_dead(module: Module, already_dead: set[Operation]) -> int:
    """Erase the pure ops a rewrite left unused; dead code the module had before stays (XLA
    drops it; erasing it all here would cost O(n) per op on large modules)."""
    return sum(remove_dead_code(g, keep=lambda op: op.opcode not in PURE or op in already_dead)
               for g in module.graphs)


@dataclasses.dataclass(frozen=True)
class PatternPass(ModulePass):
    """Subclasses name their pattern classes in ``rewrites`` (or define ``patterns()`` when
    a pattern takes the pass's options). A subclass without options is still a frozen
    dataclass (it inherits this one's), so it needs no decorator but ``register_pass``."""

    rewrites: ClassVar[tuple[type[RewritePattern], ...]] = ()

    def patterns(self) -> list[RewritePattern]:
        return [p() for p in self.rewrites]

    def apply(self, module: Module) -> None:
        before = dead_ops(module)
        constant = _CONSTANT.get() or ConstantValues()
        patterns = [_SkipFolded(p, constant) for p in self.patterns()]
        if apply_patterns_greedily(module, patterns) > 1:  # something changed
            drop_dead(module, before)
            constant.forget()


class _SkipFolded(RewritePattern):
    """A pattern that leaves alone ops whose operands are all computed at compile time: XLA
    folds them (``rewrites/compile_time.py``), in an order of its own that a rewritten form
    of the same computation would not keep."""

    def __init__(self, pattern: RewritePattern, constant: ConstantValues) -> None:
        self.pattern, self.constant = pattern, constant

    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if not self.constant.all_of(op):
            self.pattern.match_and_rewrite(op, rw)
