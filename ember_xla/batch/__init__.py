"""``ember-xla batch``: rewrite, verify, time and emulate a fleet of models in one job.

Layers: ``inputs`` (globs -> model inputs with content hashes), ``settings`` (the job's
settings and their hash), ``actions`` (what is done to one model, inside a worker process),
``worker`` / ``isolation`` (the worker process and its parent-side guard: timeout, memory,
crash), ``manifest`` (per-model outputs switched atomically, manifest entry written last),
``job`` (plan, one model end to end, the whole job), ``runner_local`` / ``runner_beam``,
``progress``, ``summary``, ``chart``. docs/BATCH.md describes the job.
"""
