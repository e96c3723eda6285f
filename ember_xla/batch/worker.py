"""The worker process (started by isolation.py's launcher, which ties its life to the parent,
then runs this module as ``__main__``): runs one model at a time for
the batch job's parent, which guards it (isolation.py).

Protocol: JSON lines. The parent sends the job settings, the worker imports what the job needs
and answers ``{"ready": ...}``; then per model the parent sends ``{"key", "path", "stage"}`` and
the worker answers ``{"status": "ok", "row": {...}}`` or ``{"status": "failed", "error": one
line}``. The protocol uses a private copy of stdout; the real stdout and stderr go to the
worker's log file, so library chatter can neither corrupt the protocol nor the terminal.

Test hook: ``EMBER_XLA_BATCH_CRASH_ON=TEXT`` makes the worker kill itself with SIGSEGV before
loading a model whose path contains TEXT (the one failure that no real input provokes on
demand: a crash in native code).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from typing import Any


def one_line(e: BaseException) -> str:
    text = " ".join(str(e).split("\n")[0].split())
    return text or type(e).__name__


def handle(task: dict[str, Any], settings: Any) -> dict[str, Any]:
    from ember_xla.batch.actions import ModelFailed, run_model
    from ember_xla.orchestrate.errors import expected_errors

    crash_on = os.environ.get("EMBER_XLA_BATCH_CRASH_ON")
    if crash_on and crash_on in task["path"]:
        os.kill(os.getpid(), signal.SIGSEGV)
    print(f"== {task['key']}: {task['path']}", file=sys.stderr, flush=True)

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    try:
        row = run_model(task["path"], settings, task["stage"], say)
        return {"status": "ok", "row": row}
    except MemoryError:
        return {"status": "failed", "error": "out of memory (MemoryError)"}
    except (ModelFailed, *expected_errors()) as e:
        return {"status": "failed", "error": one_line(e)}
    except Exception as e:  # an internal error: report it, keep the worker
        traceback.print_exc()
        return {"status": "failed", "error": f"internal error: {type(e).__name__}: "
                                             f"{one_line(e)}"}


WARMUP_HLO = """HloModule warmup
ENTRY e {
  p = f32[4] parameter(0)
  ROOT a = f32[4] add(p, p)
}
"""


def warm_up() -> None:
    """XLA's first compile in a process costs seconds: pay it before the first model's clock
    starts, so per-model timeouts measure the model."""
    import numpy as np

    from ember_xla.hlo.parser import parse_module
    from ember_xla.runtime.execute import compile_module

    compile_module(parse_module(WARMUP_HLO, "warmup")).run([np.ones(4, np.float32)])


def main() -> None:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from absl import logging

    logging.set_verbosity(logging.WARNING)
    from ember_xla.batch.settings import settings_from_dict
    from ember_xla.native import buffer_cache

    cfg = json.loads(sys.stdin.readline())
    settings = settings_from_dict(cfg["settings"])
    t0 = time.perf_counter()
    import ember_xla.orchestrate.rewrite_model  # noqa: F401  (jax, the IR and the rewrites)
    import ember_xla.runtime.compare  # noqa: F401

    if cfg.get("tensorflow"):
        import tensorflow  # noqa: F401
    warm_up()
    proto.write(json.dumps({"ready": True, "pid": os.getpid(),
                            "startup_s": round(time.perf_counter() - t0, 3)}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        result = handle(json.loads(line), settings)
        buffer_cache.release_idle()  # one model's freed buffers are not the next one's memory
        proto.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
