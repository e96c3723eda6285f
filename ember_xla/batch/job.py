"""A batch job: plan (which models are already done), run the rest on a runner, summarize.

``execute_one`` is the whole life of one model (worker run, outputs switched in, manifest entry
written last); both runners call it, so they produce the same outputs and entries.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

from ember_xla.batch import manifest
from ember_xla.batch.inputs import content_hash, discover
from ember_xla.batch.isolation import WorkerProcess
from ember_xla.batch.progress import Progress
from ember_xla.batch.settings import JobSettings


class BatchError(ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class Task:
    key: str
    path: str
    input_hash: str


@dataclasses.dataclass
class Plan:
    tasks: list[Task]                       # to run
    done: list[str]                         # keys finished before, with valid outputs
    keys: list[str]                         # every model of the job

    @property
    def needs_tensorflow(self) -> bool:
        return any(os.path.isdir(t.path) for t in self.tasks)


def plan(settings: JobSettings) -> Plan:
    inputs = discover(list(settings.inputs))
    shash = settings.settings_hash()
    tasks, done = [], []
    for mi in inputs:
        ihash = content_hash(mi.path)
        entry = manifest.read_entry(settings.out, mi.key)
        if manifest.is_done(settings.out, entry, ihash, shash):
            done.append(mi.key)
        elif (entry and not settings.retry_failed and entry.get("status") == "failed"
              and entry.get("input_hash") == ihash and entry.get("settings_hash") == shash):
            done.append(mi.key)
        else:
            tasks.append(Task(mi.key, mi.path, ihash))
    return Plan(tasks, done, [mi.key for mi in inputs])


def new_worker(settings: JobSettings, name: str, tensorflow: bool) -> WorkerProcess:
    """A worker that holds the folder lock of the job with it (``locked``)."""
    log = os.path.join(settings.out, manifest.LOGS, f"worker-{name}.log")
    held = _LOCKS.get(os.path.abspath(settings.out))
    return WorkerProcess(settings, log, tensorflow, (held,) if held is not None else ())


def execute_one(worker: WorkerProcess, task: Task, settings: JobSettings,
                run_id: str) -> dict[str, Any]:
    """Run one model in ``worker``; switch its outputs in; write its manifest entry last."""
    out = settings.out
    worker.ensure_started()  # (re)starting a worker is not the model's time
    stage = manifest.new_stage(out, task.key)
    t0 = time.monotonic()
    result = worker.run({"key": task.key, "path": os.path.abspath(task.path), "stage": stage})
    seconds = round(time.monotonic() - t0, 3)
    manifest.remove_entry(out, task.key)
    entry: dict[str, Any] = {
        "key": task.key, "input": task.path, "input_hash": task.input_hash,
        "settings_hash": settings.settings_hash(), "status": result["status"],
        "error": result.get("error", ""), "row": result.get("row") or {},
        "run_id": run_id, "seconds": seconds, "files": {}}
    if result["status"] == "ok":
        entry["files"] = manifest.hash_tree(stage)
        manifest.switch_in(out, task.key, stage)
    else:
        manifest.discard(stage)
        manifest.switch_in(out, task.key, None)
    manifest.write_entry(out, entry)
    return entry


_LOCKS: dict[str, int] = {}  # output folder -> the descriptor of its held lock
LOCK_WAIT_S = 10.0  # a killed job's workers die within milliseconds; wait that long for them


@contextlib.contextmanager
def locked(out: str) -> Iterator[None]:
    """One job per output folder at a time. The lock dies with the last process holding it:
    the job's and its workers' (they inherit it), so no rerun starts while one still runs."""
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
        _LOCKS[os.path.abspath(out)] = fd
        yield
    finally:
        _LOCKS.pop(os.path.abspath(out), None)
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
