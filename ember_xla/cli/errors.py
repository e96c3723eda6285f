"""Turn every expected failure into one line on stderr and exit code 2 (never a traceback)."""

from __future__ import annotations

import sys
from collections.abc import Callable

USAGE_EXIT = 2


class UsageError(ValueError):
    pass


def expected_errors() -> tuple[type[BaseException], ...]:
    from ember_xla.hlo_import.errors import ImportError_
    from ember_xla.ir.dialect import VerifyError
    from ember_xla.native import NativeLibraryMissing
    from ember_xla.runtime.legalize import LegalizeError
    from ember_xla.runtime.xla_cpu import XlaError

    return (ImportError_, VerifyError, XlaError, LegalizeError, UsageError, OSError, ValueError,
            NativeLibraryMissing)


def guarded(fn: Callable[[], int]) -> int:
    try:
        return fn()
    except expected_errors() as e:
        msg = " ".join(str(e).split("\n")[0].split())
        print(f"ember-xla: error: {msg}", file=sys.stderr)
        return USAGE_EXIT
    except KeyboardInterrupt:
        print("ember-xla: interrupted", file=sys.stderr)
        return 130
