"""The two errors of the DAE program format: a malformed program or one the format cannot
express (``ProgramError``), and a well-formed program that does not fit a machine
(``ProgramDoesNotFit``, raised by the binder and by both timing models)."""


class ProgramError(ValueError):
    """A module the DAE program cannot express, or a malformed program / program text."""


class ProgramDoesNotFit(ValueError):
    """The program cannot run on the target (e.g. a queue too small for what a callback
    needs); the message says why."""
