"""DLC -> DAE program: the emitter that turns a lowered cluster's DLC function into the program
format of ``ember_xla.dae`` (docs/DAE_PROGRAM.md)."""

from ember_xla.dae_target.program.emit import emit_cluster, emit_program

__all__ = ["emit_cluster", "emit_program"]
