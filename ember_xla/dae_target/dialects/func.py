"""The ``func`` dialect of the Ember levels: only ``func.return``, the terminator of a lowered
function. A function itself is an ``ir.Graph`` whose block arguments are its memrefs (the
custom-call's operands, then the output buffers)."""

from __future__ import annotations

from ember_xla.ir.dialect import Dialect, register_dialect
from ember_xla.ir.opdef import OpDef
from ember_xla.ir.traits import IsTerminator

func = register_dialect(Dialect("func"))


@func.add_op
class ReturnOp(OpDef):
    """``"func.return"(%vals...)``: ends a function; its operands are what the function
    returns (usually none: results are written into the output memrefs)."""

    opcode = "func.return"
    traits = frozenset({IsTerminator})

    def verify_(self) -> None:
        self.expect_counts(results=0, regions=0)
        if self.parent_op is not None:
            raise self.fail("must end a function, not a nested region")
