"""Run an original and a rewritten module on the same inputs and compare the outputs; time
modules side by side."""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np

from ember_xla.ir.graph import Module
from ember_xla.runtime.execute import compile_module


def max_float_diff(a: np.ndarray, b: np.ndarray) -> float:
    """The largest ``|a - b|``: equal values (equal infinities too) and NaN against NaN are a
    difference of 0, NaN against a number or unequal infinities are ``inf``."""
    x, y = a.astype(np.float64), b.astype(np.float64)
    same = (x == y) | (np.isnan(x) & np.isnan(y))
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(same, 0.0, np.abs(x - y))
    diff = np.where(np.isnan(diff), np.inf, diff)
    return float(diff.max()) if diff.size else 0.0


def compare_outputs(want: list[np.ndarray], got: list[np.ndarray]) -> dict[str, Any]:
    rows = []
    for i, (a, b) in enumerate(zip(want, got, strict=True)):
        same_bits = a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()
        if a.dtype.kind in "fc" or str(a.dtype) == "bfloat16":
            max_diff = max_float_diff(a, b)
        else:
            max_diff = float(np.abs(a.astype(np.int64) - b.astype(np.int64)).max()) if a.size \
                else 0.0
        rows.append({"output": i, "shape": list(a.shape), "dtype": str(a.dtype),
                     "bitwise_equal": bool(same_bits), "max_abs_diff": max_diff})
    return {"outputs": rows,
            "bitwise_equal": all(r["bitwise_equal"] for r in rows),
            "max_abs_diff": max((r["max_abs_diff"] for r in rows), default=0.0)}


def within_tolerance(check: dict[str, Any], atol: float) -> bool:
    """The one tolerance rule of a model's verification: bit for bit, or every output within
    ``atol`` of the original's."""
    return bool(check["bitwise_equal"] or check["max_abs_diff"] <= atol)


def verify_outputs(want: list[np.ndarray], got: list[np.ndarray], atol: float
                   ) -> dict[str, Any]:
    """``compare_outputs`` plus the verdict: ``ok`` (``within_tolerance``) and ``atol``."""
    check = compare_outputs(want, got)
    return {**check, "ok": within_tolerance(check, atol), "atol": atol}


def verify_rewrite(original: Module, rewritten: Module,
                   inputs: list[np.ndarray],
                   id_cases: dict[str, list[np.ndarray]] | None = None) -> dict[str, Any]:
    """Compare on ``inputs`` and on each of ``id_cases`` (the same inputs with edge-case ids,
    ``runtime.inputs.edge_id_inputs``); the result's totals cover every case, ``cases``
    lists each one's."""
    a, b = compile_module(original), compile_module(rewritten)
    result = compare_outputs(a.run(inputs), b.run(inputs))
    if id_cases:
        cases = {"in_range": {k: result[k] for k in ("bitwise_equal", "max_abs_diff")}}
        for name, xs in id_cases.items():
            r = compare_outputs(a.run(xs), b.run(xs))
            cases[name] = {k: r[k] for k in ("bitwise_equal", "max_abs_diff")}
        result["bitwise_equal"] = all(c["bitwise_equal"] for c in cases.values())
        result["max_abs_diff"] = max(c["max_abs_diff"] for c in cases.values())
        result["cases"] = cases
    return result


def time_modules(modules: dict[str, Module], inputs: list[np.ndarray],
                 repeats: int = 10) -> dict[str, float]:
    """Median seconds per run of each module, runs interleaved (one warm-up each). Inputs
    are placed on the device once, as a model's weights and a batch would be."""
    import jax

    exes = {k: compile_module(m) for k, m in modules.items()}
    with jax.enable_x64(True):
        on_device = [jax.device_put(np.asarray(a)) for a in inputs]
    for e in exes.values():
        jax.block_until_ready(e.run_device(on_device))
    times: dict[str, list[float]] = {k: [] for k in exes}
    for _ in range(repeats):
        for k, e in exes.items():
            t0 = time.perf_counter()
            jax.block_until_ready(e.run_device(on_device))
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}
