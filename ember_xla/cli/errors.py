"""Turn every expected failure into one line on stderr and exit code 2 (never a traceback)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from ember_xla.orchestrate.errors import ModelFailed, expected_errors

USAGE_EXIT = 2
CHECK_FAILED_EXIT = 1  # the model was processed but a check failed (e.g. --verify)
INTERNAL_EXIT = 70  # EX_SOFTWARE: a bug of ours, not bad input (the fuzzer counts these)


MAX_MESSAGE = 400  # characters of one error line; a 100 KB flag value is not echoed whole


def shorten(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text`` cut to ``limit`` characters, its head and tail kept, the cut counted."""
    if len(text) <= limit:
        return text
    keep = (limit - 40) // 2
    return f"{text[:keep]} ...({len(text) - 2 * keep} characters cut)... {text[-keep:]}"


def guarded(fn: Callable[[], int]) -> int:
    try:
        return fn()
    except ModelFailed as e:  # the model was processed, a check failed: exit 1, like a test
        print(f"ember-xla: error: {shorten(' '.join(str(e).split(chr(10))[0].split()))}",
              file=sys.stderr)
        return CHECK_FAILED_EXIT
    except BrokenPipeError:  # the reader went away (``ember-xla inspect M | head``): quietly
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no flush error
        except OSError:
            pass
        return 128 + 13  # as a shell reports a process killed by SIGPIPE
    except expected_errors() as e:
        msg = shorten(" ".join(str(e).split("\n")[0].split()))
        print(f"ember-xla: error: {msg}", file=sys.stderr)
        return USAGE_EXIT
    except KeyboardInterrupt:
        print("ember-xla: interrupted", file=sys.stderr)
        return 130
    except (MemoryError, RecursionError) as e:
        print(f"ember-xla: error: out of resources ({type(e).__name__}); the input is too large "
              "or nested too deeply", file=sys.stderr)
        return USAGE_EXIT
    except Exception as e:  # a bug: still one line, never a traceback, but a distinct exit code
        if os.environ.get("EMBER_XLA_TRACEBACK"):
            raise
        msg = shorten(" ".join(str(e).split("\n")[0].split()), 300)
        print(f"ember-xla: internal error: {type(e).__name__}: {msg} (please report it; "
              "EMBER_XLA_TRACEBACK=1 shows the traceback)", file=sys.stderr)
        return INTERNAL_EXIT
