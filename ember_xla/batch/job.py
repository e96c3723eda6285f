"""A batch job: plan (which models are already done), run the rest on a runner, summarize
(the tasks and the life of one model: ``tasks.py``)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

from ember_xla.batch import folder_lock, manifest
from ember_xla.batch.progress import Progress
from ember_xla.batch.settings import JobSettings
from ember_xla.batch.tasks import BatchError, plan
from ember_xla.util.atomic import OutputRefused, check_writable

__all__ = ["BatchError", "locked", "run_job"]


LOCK_WAIT_S = 10.0  # a killed job's workers die within milliseconds; wait that long for them


@contextlib.contextmanager
def locked(out: str) -> Iterator[None]:
    """One job per output folder at a time. The lock dies with the last process holding it:
    the job's and its workers' (they inherit it), so no rerun starts while one still runs."""
    try:
        check_writable(out)
    except OutputRefused as e:
        raise BatchError(f"--out {e}") from None
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, ".lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise BatchError(f"{out}: another batch job (or a worker of one) is "
                                     "writing to this folder") from None
                time.sleep(0.1)
        folder_lock.hold(out, fd)
        yield
    finally:
        folder_lock.release(out)
        os.close(fd)


def run_job(settings: JobSettings, say: Any = print) -> int:
    """Run the job; 0 if every model is ok, 1 if any failed (each one reported)."""
    from ember_xla.batch import summary

    with locked(settings.out):
        manifest.clean_staging(settings.out)
        p = plan(settings)
        run_id = uuid.uuid4().hex[:12]
        say(f"batch: {len(p.keys)} models; {len(p.done)} done before (kept), {len(p.tasks)} to "
            f"run on the {settings.runner} runner with {settings.workers} worker(s); "
            f"actions {','.join(settings.actions)}")
        if "time" in settings.actions and settings.workers > 1 and len(p.tasks) > 1:
            cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
                os.cpu_count() or 1)
            say(f"batch: note: timing with {settings.workers} workers on {cores} core(s): "
                "models timed at the same time share the cores and each other's caches, so "
                "their speed-ups are noisy; time with --workers=1")
        sys.stdout.flush()
        progress = Progress(len(p.tasks), settings.progress)
        t0 = time.monotonic()
        if p.tasks:
            progress.start()
            try:
                if settings.runner == "beam":
                    from ember_xla.batch.runner_beam import run_beam

                    run_beam(p, settings, run_id, progress)
                else:
                    from ember_xla.batch.runner_local import run_local

                    run_local(p, settings, run_id, progress)
            finally:
                progress.close()
        elapsed = time.monotonic() - t0
        entries = [manifest.read_entry(settings.out, k) for k in p.keys]
        missing = [k for k, e in zip(p.keys, entries, strict=True) if e is None]
        if missing:
            raise BatchError(f"the runner finished without a result for {len(missing)} "
                             f"model(s), e.g. {missing[0]}")
        s = summary.write_summary(settings, [e for e in entries if e], run_id,
                                  {"ran": len(p.tasks), "kept": len(p.done),
                                   "elapsed_s": round(elapsed, 3)})
        say(s["text"])
        return 0 if s["totals"]["failed"] == 0 else 1
