"""``--runner=beam``: the same job as an Apache Beam pipeline (``pip install 'ember-xla[beam]'``).

``Create(tasks) | Reshuffle | ParDo(ProcessModel)``: each DoFn instance owns a worker process
(started in ``setup``) and calls ``tasks.execute_one``, the local runner's code, so outputs and
manifest entries are the same. ``--out`` and the inputs must be paths every Beam worker sees
(a shared or mounted file system). Default options: DirectRunner, ``--workers`` threads;
``--beam_options`` passes any others, e.g. ``--runner=DataflowRunner --project=P --region=R
--temp_location=gs://B/tmp --sdk_container_image=IMAGE_WITH_EMBER_XLA`` (docs/BATCH.md).
Progress: the launcher watches the manifest for this run's entries.
"""

from __future__ import annotations

import os
import shlex
import threading
from typing import Any

from ember_xla.batch import manifest
from ember_xla.batch.progress import Progress
from ember_xla.batch.settings import JobSettings
from ember_xla.batch.tasks import Plan, Task, execute_one, new_worker


class BeamMissing(ValueError):
    pass


def _beam() -> Any:
    try:
        import apache_beam as beam
    except ImportError:
        raise BeamMissing("--runner=beam needs Apache Beam: pip install 'ember-xla[beam]' "
                          "(docs/BATCH.md: Beam and TensorFlow in one environment)") from None
    return beam


def pipeline_options(settings: JobSettings) -> list[str]:
    opts = shlex.split(settings.beam_options)
    if not any(o.startswith("--runner") for o in opts):
        opts += ["--runner=DirectRunner", f"--direct_num_workers={settings.workers}",
                 "--direct_running_mode=multi_threading"]
    return opts


def _make_dofn(beam: Any) -> Any:
    class ProcessModel(beam.DoFn):
        def __init__(self, settings: JobSettings, run_id: str, tensorflow: bool):
            self.settings, self.run_id, self.tensorflow = settings, run_id, tensorflow
            self.worker: Any = None

        def setup(self) -> None:
            name = f"beam-{os.getpid()}-{threading.get_ident()}"
            self.worker = new_worker(self.settings, name, self.tensorflow)

        def process(self, task: tuple[str, str, str]) -> Any:
            entry = execute_one(self.worker, Task(*task), self.settings, self.run_id)
            yield entry["key"], entry["status"]

        def teardown(self) -> None:
            if self.worker is not None:
                self.worker.stop()

    return ProcessModel


def _scan(settings: JobSettings, pending: set[str], run_id: str, progress: Progress) -> None:
    for key in sorted(pending):
        e = manifest.read_entry(settings.out, key)
        if e and e.get("run_id") == run_id:
            pending.discard(key)
            progress.update(key, e["status"], e.get("seconds") or 0.0, e.get("error", ""))


def run_beam(plan: Plan, settings: JobSettings, run_id: str, progress: Progress) -> None:
    beam = _beam()
    import logging

    from apache_beam.options.pipeline_options import PipelineOptions

    from ember_xla.batch.tasks import BatchError

    logging.getLogger("apache_beam").setLevel(logging.ERROR)
    logging.getLogger().setLevel(logging.ERROR)
    dofn = _make_dofn(beam)(settings, run_id, plan.needs_tensorflow)
    tasks = [(t.key, t.path, t.input_hash) for t in plan.tasks]
    pending = {t.key for t in plan.tasks}
    stop = threading.Event()

    def watch() -> None:
        while pending and not stop.wait(0.5):
            _scan(settings, pending, run_id, progress)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        with beam.Pipeline(options=PipelineOptions(pipeline_options(settings))) as p:
            _ = (p | "models" >> beam.Create(tasks) | "spread" >> beam.Reshuffle()
                 | "process" >> beam.ParDo(dofn))
    except Exception as e:
        msg = " ".join(str(e).split("\n")[0].split())
        raise BatchError(f"the Beam pipeline failed: {type(e).__name__}: {msg}") from None
    finally:
        stop.set()
        watcher.join()
    _scan(settings, pending, run_id, progress)  # the last ones
