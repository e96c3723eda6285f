"""Rewrite the few forms XLA's optimized HLO uses that its HLO->StableHLO importer rejects.

``bitcast`` between shapes with default (row-major) layouts is a ``reshape``: this pass makes it
one, so XLA's *optimized* HLO can be compiled again. Bitcasts that really reorder memory
(non-default layouts) are refused with a clear error instead of being run wrongly.
"""

from __future__ import annotations

import dataclasses

from ember_xla.ir.graph import Module
from ember_xla.ir.passes import ModulePass, register_pass


class LegalizeError(ValueError):
    pass


@register_pass
@dataclasses.dataclass(frozen=True)
class BitcastToReshape(ModulePass):
    name = "bitcast-to-reshape"

    def apply(self, module: Module) -> None:
        for g in module.graphs:
            for op in g.ops:
                if op.opcode != "bitcast":
                    continue
                src, dst = op.operands[0].type, op.result.type
                if (src.element_type != dst.element_type or src.size != dst.size
                        or not src.has_default_layout() or not dst.has_default_layout()):
                    raise LegalizeError(
                        f"computation {g.name}, instruction {op.name}: bitcast {src} -> {dst} "
                        "changes layout or type; it cannot be run outside XLA's pipeline")
                op.opcode = "reshape"


def needs_legalization(module: Module) -> bool:
    return any(op.opcode == "bitcast" for op in module.walk())
