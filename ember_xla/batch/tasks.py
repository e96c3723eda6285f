"""A batch job's tasks: the plan (which models are already done, which to run) and
``execute_one``, the whole life of one model (worker run, outputs switched in, manifest entry
written last); both runners call it, so they produce the same outputs and entries."""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

from ember_xla.batch import folder_lock, manifest
from ember_xla.batch.inputs import content_hash, discover
from ember_xla.batch.isolation import WorkerProcess
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
    inputs = discover(list(settings.inputs), settings.out)
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
    """A worker that holds the folder lock of the job with it (``job.locked``)."""
    log = os.path.join(settings.out, manifest.LOGS, f"worker-{name}.log")
    lock = folder_lock.held(settings.out)
    return WorkerProcess(settings, log, tensorflow, (lock,) if lock is not None else ())


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
