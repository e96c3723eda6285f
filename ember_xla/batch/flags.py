"""The absl flags of ``ember-xla batch`` (``--inputs``, ``--out``, ``--seed``, ``--signature``,
``--unknown_dim``, ``--tf_import``, ``--group_tables`` and ``--timing_repeats`` are shared with
the other commands and defined in cli/main.py). Every setting can also come from ``--flagfile``."""

from __future__ import annotations

import os

from absl import flags

from ember_xla.batch.settings import RUNNERS, JobSettings
from ember_xla.hlo_import.unknown_dims import UnknownDims
from ember_xla.runtime.compare import VERIFY_ATOL, VERIFY_RTOL

FLAGS = flags.FLAGS
flags.DEFINE_list("actions", ["rewrite", "verify"], "batch: what to do to each model, in "
                  "order: rewrite (clusters -> ember custom-calls), verify (original vs "
                  "rewritten on XLA:CPU), time (speed-up vs XLA:CPU), lower and emulate (the "
                  "DAE compiler and emulator, when this build has them).")
flags.DEFINE_integer("workers", 1, "batch: models processed at the same time (one worker "
                     "process each).", lower_bound=1)
flags.DEFINE_float("timeout_s", 600.0, "batch: per-model time limit in seconds; a model past "
                   "it is reported as failed and its worker killed.", lower_bound=0.001)
flags.DEFINE_integer("memory_mb", 0, "batch: per-model memory limit (resident MB of its worker "
                     "process, Linux); 0: no limit of our own.", lower_bound=0)
flags.DEFINE_enum("runner", "local", list(RUNNERS), "batch: local (worker processes on this "
                  "machine) or beam (an Apache Beam pipeline; pip install 'ember-xla[beam]').")
flags.DEFINE_string("beam_options", "", "batch --runner=beam: Beam pipeline options, e.g. "
                    "'--runner=DataflowRunner --project=P --region=R --temp_location=gs://B/tmp"
                    " --sdk_container_image=IMG' (default: DirectRunner, --workers threads).")
flags.DEFINE_enum("progress", "auto", ["auto", "bar", "log", "none"], "batch: a progress bar "
                  "with counts and ETA (bar), a line per model (log), or auto: bar on a "
                  "terminal, log otherwise.")
flags.DEFINE_bool("retry_failed", True, "batch: rerun models that failed last time (models "
                  "finished with valid outputs are always kept).")
flags.DEFINE_float("verify_atol", VERIFY_ATOL, "rewrite --verify, batch, emulate, place: the "
                   "absolute part of the tolerance: an output element counts as verified when "
                   "it differs from the original's by at most verify_atol + verify_rtol x "
                   "|original| (beyond it the command exits 1 and writes nothing).",
                   lower_bound=0.0)
flags.DEFINE_float("verify_rtol", VERIFY_RTOL, "rewrite --verify, batch, emulate, place: the "
                   "relative part of the tolerance (see --verify_atol).", lower_bound=0.0)

# Settings of plugged-in actions, read when the flags exist (defined by those commands).
PLUGIN_FLAGS = ("target", "opt_level", "O", "pipeline")


def settings_from_flags() -> JobSettings:
    from ember_xla.batch.actions import validate

    extra = tuple((n, FLAGS[n].value) for n in PLUGIN_FLAGS
                  if n in FLAGS and FLAGS[n].value is not None)
    globs = [g for g in (FLAGS.inputs or "").split(",") if g.strip()]
    return JobSettings(
        inputs=tuple(globs), out=os.path.abspath(FLAGS.out), actions=validate(FLAGS.actions),
        workers=FLAGS.workers, timeout_s=FLAGS.timeout_s, memory_mb=FLAGS.memory_mb,
        runner=FLAGS.runner, seed=FLAGS.seed, group_tables=FLAGS.group_tables,
        signature=FLAGS.signature,
        unknown_dim=UnknownDims.parse(FLAGS.unknown_dim).to_json(),
        tf_import=tuple(FLAGS.tf_import),
        timing_repeats=FLAGS.timing_repeats, verify_atol=FLAGS.verify_atol,
        verify_rtol=FLAGS.verify_rtol,
        retry_failed=FLAGS.retry_failed, progress=FLAGS.progress,
        beam_options=FLAGS.beam_options, extra=extra)
