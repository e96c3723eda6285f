"""The local runner: ``--workers`` threads, each driving its own worker process (so one model
per process at a time, isolated), pulling models from one queue."""

from __future__ import annotations

import queue
import threading
from typing import Any

from ember_xla.batch.progress import Progress
from ember_xla.batch.settings import JobSettings
from ember_xla.batch.tasks import Plan, Task, execute_one, new_worker


def run_local(plan: Plan, settings: JobSettings, run_id: str, progress: Progress) -> None:
    todo: queue.Queue[Task] = queue.Queue()
    for t in plan.tasks:
        todo.put(t)
    errors: list[BaseException] = []
    stop = threading.Event()
    workers: list[Any] = []

    def drive(slot: int) -> None:
        worker = new_worker(settings, str(slot), plan.needs_tensorflow)
        workers.append(worker)
        try:
            while not stop.is_set():
                try:
                    task = todo.get_nowait()
                except queue.Empty:
                    return
                entry = execute_one(worker, task, settings, run_id)
                progress.update(task.key, entry["status"], entry["seconds"], entry["error"])
        except BaseException as e:  # a job-level failure (e.g. the worker cannot start)
            errors.append(e)
            stop.set()
        finally:
            worker.stop()

    n = max(1, min(settings.workers, len(plan.tasks)))
    threads = [threading.Thread(target=drive, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(0.2)
    except KeyboardInterrupt:
        stop.set()
        for w in workers:
            w.kill()
        raise
    if errors:
        raise errors[0]
