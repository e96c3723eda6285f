"""The errors a command may meet on bad input, one type each: ``UsageError`` (a bad argument or
option), ``ModelFailed`` (the model was processed but a check failed, e.g. the rewrite changed
its outputs), and ``expected_errors()``: every error type that is the input's fault, which the
CLI prints as one line with exit code 2 and a batch worker records as the model's failure."""

from __future__ import annotations


class UsageError(ValueError):
    pass


class ModelFailed(ValueError):
    """The model was processed but a check failed (e.g. the rewrite changed its outputs)."""


def expected_errors() -> tuple[type[BaseException], ...]:
    from ember_xla.hlo.errors import HloImportError
    from ember_xla.ir.dialect import VerifyError
    from ember_xla.native import NativeLibraryMissing
    from ember_xla.runtime.legalize import LegalizeError
    from ember_xla.runtime.xla_cpu import XlaError

    return (HloImportError, VerifyError, XlaError, LegalizeError, UsageError, OSError, ValueError,
            NativeLibraryMissing)
