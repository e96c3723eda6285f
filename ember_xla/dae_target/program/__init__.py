"""DAE programs (docs/DAE_PROGRAM.md): the data model, the emitter from DLC, the text form, the
printer and the resource binder."""

from ember_xla.dae_target.program.bind import Binding, bind_program
from ember_xla.dae_target.program.emit import emit_cluster, emit_program
from ember_xla.dae_target.program.model import VERSION, DaeProgram, ProgramError
from ember_xla.dae_target.program.printer import print_program
from ember_xla.dae_target.program.text import from_text, to_text

__all__ = ["VERSION", "Binding", "DaeProgram", "ProgramError", "bind_program", "emit_cluster",
           "emit_program", "from_text", "print_program", "to_text"]
