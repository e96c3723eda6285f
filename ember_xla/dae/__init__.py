"""The DAE program format (docs/DAE_PROGRAM.md): the contract between the compiler
(``dae_target``), which emits programs, and the emulator, which runs them. Its data model, text
form, printer, validation, per-instruction semantics and numerics, and the binding of a program
to a machine description (``ProgramDoesNotFit`` when it does not fit). It imports only the IR
core and ``machines``."""

from ember_xla.dae.bind import Binding, bind_program
from ember_xla.dae.errors import ProgramDoesNotFit, ProgramError
from ember_xla.dae.model import VERSION, DaeProgram
from ember_xla.dae.printer import print_program
from ember_xla.dae.text import from_text, to_text

__all__ = ["VERSION", "Binding", "DaeProgram", "ProgramDoesNotFit", "ProgramError",
           "bind_program", "from_text", "print_program", "to_text"]
