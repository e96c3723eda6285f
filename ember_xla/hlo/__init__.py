"""The HLO dialect on the generic IR core: shapes, literals, opcodes, printer and verifier.

An HLO module is an ``ir.Module`` whose graphs are HLO computations and whose operations are HLO
instructions: ``op.opcode`` is the HLO opcode, ``op.result.type`` its ``Shape`` and
``op.attributes`` every other field of XLA's ``HloInstructionProto`` in plain-Python form
(field name -> value; messages as dicts, enums by name, repeated fields as lists).
"""

from ember_xla.hlo import dialect as _dialect  # noqa: F401  (registers "hlo")
from ember_xla.hlo.shape import Shape

__all__ = ["Shape"]
