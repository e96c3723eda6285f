"""The shape of a canonicalization pass: a registered ``ModulePass`` that applies its
``RewritePattern``s greedily to every graph, then drops the pure ops its rewrites orphaned."""

from __future__ import annotations

import dataclasses

from ember_xla.ir.graph import Module
from ember_xla.ir.passes import ModulePass
from ember_xla.ir.rewriter import RewritePattern, apply_patterns_greedily, remove_dead_code

# ops without side effects that a rewrite may leave unused (anything else is kept)
PURE = frozenset({
    "abs", "add", "and", "bitcast", "broadcast", "clamp", "compare", "concatenate",
    "constant", "convert", "copy", "divide", "dot", "gather", "iota", "maximum", "minimum",
    "multiply", "negate", "not", "or", "reduce", "remainder", "reshape", "scatter", "select",
    "slice", "subtract", "transpose", "xor", "call",
})


def drop_dead(module: Module) -> int:
    return sum(remove_dead_code(g, keep=lambda op: op.opcode not in PURE)
               for g in module.graphs)


@dataclasses.dataclass(frozen=True)
class PatternPass(ModulePass):
    """Subclasses define ``patterns()``."""

    def patterns(self) -> list[RewritePattern]:
        raise NotImplementedError

    def apply(self, module: Module) -> None:
        apply_patterns_greedily(module, self.patterns())
        drop_dead(module)
