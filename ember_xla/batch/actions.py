"""What a batch job does to one model, run inside a worker process.

Built in: ``rewrite`` (clusters -> ember custom-calls, the ``rewrite`` command's library
function), ``verify`` (original vs rewritten on XLA:CPU, random valid inputs), ``time``
(median time per run of both modules on XLA:CPU: the speed-up of the native kernels).
Plugged in: ``lower`` and ``emulate`` come from the orchestration of the DAE compiler and
emulator; each is available once its orchestration module defines ``batch_action(model,
rewritten, out_dir, options) -> dict`` (summary fields, e.g. ``{"emulated_cycles": 12345}``;
``emulate`` does, ``lower`` not yet). Asking for one that is missing is a one-line error before
any model is touched. The rewritten module reaches them in memory.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Any

from ember_xla.batch.settings import JobSettings
from ember_xla.orchestrate.errors import ModelFailed

__all__ = ["ORDER", "PLUGINS", "ActionError", "ModelFailed", "plugin", "run_model", "validate"]

BUILTIN = ("rewrite", "verify", "time")
PLUGINS = {"lower": ("ember_xla.orchestrate.lower_model", "the DAE compiler (ember-xla lower)"),
           "emulate": ("ember_xla.orchestrate.emulate_model",
                       "the DAE emulator (ember-xla emulate)")}
ORDER = BUILTIN + tuple(PLUGINS)
ROW_FIELDS = ("signatures", "instructions", "clusters", "near_misses", "verify",
              "max_abs_diff", "xla_ms", "ember_ms", "speedup", "emulated_cycles")


class ActionError(ValueError):
    pass


def plugin(name: str) -> Callable[..., dict[str, Any]] | None:
    module, _ = PLUGINS[name]
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name and module.startswith(e.name):
            return None
        raise
    return getattr(mod, "batch_action", None)


def validate(names: list[str]) -> tuple[str, ...]:
    """The requested actions in execution order; a one-line error for unknown, unavailable or
    incomplete requests."""
    names = [n.strip() for n in names if n.strip()]
    if not names:
        raise ActionError("--actions: empty; expected e.g. --actions=rewrite,verify")
    for n in names:
        if n not in ORDER:
            raise ActionError(f"--actions: unknown action {n!r}; expected some of "
                              f"{', '.join(ORDER)}")
        if n in PLUGINS and plugin(n) is None:
            raise ActionError(f"--actions: {n!r} is not available in this build: "
                              f"{PLUGINS[n][1]} is not installed "
                              f"({PLUGINS[n][0]}.batch_action is missing)")
    if "rewrite" not in names:
        raise ActionError(f"--actions: {','.join(names)} needs rewrite first "
                          f"(e.g. --actions=rewrite,{','.join(names)})")
    return tuple(n for n in ORDER if n in names)


def _speed(model: Any, rewritten: Any, settings: JobSettings) -> tuple[float, float]:
    from ember_xla.runtime.compare import time_modules
    from ember_xla.runtime.inputs import random_inputs

    inputs = random_inputs(model.module, settings.seed, model.bound)
    t = time_modules({"xla": model.module, "ember": rewritten}, inputs,
                     settings.timing_repeats)
    return t["xla"], t["ember"]


def run_model(path: str, settings: JobSettings, out_dir: str,
              say: Callable[[str], None]) -> dict[str, Any]:
    """Run the job's actions on the model(s) at ``path``; outputs go to ``out_dir`` (one
    sub-folder per signature when a SavedModel has several). Returns the summary fields."""
    from ember_xla.hlo_import.load import load_models
    from ember_xla.orchestrate.rewrite_model import rewrite_one

    acts = settings.actions
    models = load_models(path, settings.signature, settings.unknown_dim,
                         tf_import=settings.tf_import)
    row: dict[str, Any] = {f: None for f in ROW_FIELDS}
    row.update(signatures=len(models), instructions=0, clusters=0, near_misses=0)
    xla_s = ember_s = 0.0
    worst = 0.0
    notices = [n for m in models for n in m.notices]
    for n in notices:
        say(f"note: {n}")
    if notices:
        row["notices"] = notices
    for m in models:
        sub = out_dir
        if len(models) > 1:
            sub = os.path.join(out_dir, m.source.rsplit("[", 1)[-1].rstrip("]"))
        report, rewritten = rewrite_one(m, sub, "verify" in acts, settings.seed, say=say,
                                        group=settings.group_tables,
                                        verify_atol=settings.verify_atol,
                                        verify_rtol=settings.verify_rtol)
        row["instructions"] += sum(len(g.ops) for g in m.module.graphs)
        row["clusters"] += len(report["clusters"])
        row["near_misses"] += len(report["near_misses"])
        if "verify" in acts:
            v = report["verify"]
            worst = max(worst, v["max_abs_diff"])  # beyond --verify_atol, rewrite_one raised
            if not v["bitwise_equal"]:
                row["verify"] = "close"
            elif row["verify"] is None:
                row["verify"] = "bitwise"
        if "time" in acts and report["clusters"]:
            x, e = _speed(m, rewritten, settings)
            xla_s, ember_s = xla_s + x, ember_s + e
        plugged = [a for a in acts if a in PLUGINS]
        if plugged:
            for a in plugged:
                fn = plugin(a)
                assert fn is not None  # validated before the job started
                extra = fn(m, rewritten, sub, {**dict(settings.extra),  # and the one tolerance
                                                "verify_atol": settings.verify_atol,
                                                "verify_rtol": settings.verify_rtol})
                for k, val in extra.items():
                    row[k] = val if row.get(k) is None else row[k] + val
    if "verify" in acts:
        row["max_abs_diff"] = worst
    if ember_s > 0:
        row.update(xla_ms=round(1e3 * xla_s, 4), ember_ms=round(1e3 * ember_s, 4),
                   speedup=round(xla_s / ember_s, 3))
    return row
