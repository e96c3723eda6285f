"""``ember-xla batch --inputs=GLOB[,GLOB] --out=DIR [--actions=...] [--workers=N] ...``: run
the rewrite (and verification, timing, lowering, emulation) over a fleet of models; see
ember_xla/batch and docs/BATCH.md. Exit 0: every model ok; 1: some failed (each reported);
2: the job itself could not run (bad flags, a glob matching nothing, ...)."""

from __future__ import annotations

from ember_xla.orchestrate.errors import UsageError


def cmd_batch(args: list[str]) -> int:
    from ember_xla.batch.flags import FLAGS, settings_from_flags
    from ember_xla.batch.isolation import WorkerStartError
    from ember_xla.batch.job import run_job

    if args:
        raise UsageError(f"batch takes no MODEL arguments (got {args[0]!r}); give the models "
                         "with --inputs=GLOB[,GLOB...]")
    if not FLAGS.inputs:
        raise UsageError("batch needs --inputs=GLOB[,GLOB...] (SavedModel folders, .pb, .hlo)")
    if not FLAGS.out:
        raise UsageError("batch needs --out DIR")
    settings = settings_from_flags()
    try:
        return run_job(settings)
    except WorkerStartError as e:
        raise UsageError(str(e)) from None
