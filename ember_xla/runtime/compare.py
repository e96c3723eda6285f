"""Run an original and a rewritten module on the same inputs and compare the outputs; time
modules side by side."""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np

from ember_xla.ir.graph import Module
from ember_xla.runtime.execute import compile_module


def _float_diffs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise ``|a - b|``: equal values (equal infinities too) and NaN against NaN are a
    difference of 0, NaN against a number or unequal infinities are ``inf``."""
    x, y = a.astype(np.float64), b.astype(np.float64)
    same = (x == y) | (np.isnan(x) & np.isnan(y))
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(same, 0.0, np.abs(x - y))
    return np.where(np.isnan(diff), np.inf, diff)


def max_float_diff(a: np.ndarray, b: np.ndarray) -> float:
    """The largest of ``_float_diffs(a, b)`` (0 for empty arrays)."""
    diff = _float_diffs(a, b)
    return float(diff.max()) if diff.size else 0.0


def _where_largest(a: np.ndarray, b: np.ndarray) -> list[int]:
    """The index of the largest of ``_float_diffs(a, b)``."""
    diff = _float_diffs(a, b)
    return [int(k) for k in np.unravel_index(int(np.argmax(diff)), a.shape)]


def compare_outputs(want: list[np.ndarray], got: list[np.ndarray]) -> dict[str, Any]:
    rows = []
    for i, (a, b) in enumerate(zip(want, got, strict=True)):
        same_bits = a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()
        if a.dtype.kind in "fc" or str(a.dtype) == "bfloat16":
            max_diff = max_float_diff(a, b)
        else:
            max_diff = float(np.abs(a.astype(np.int64) - b.astype(np.int64)).max()) if a.size \
                else 0.0
        row = {"output": i, "shape": list(a.shape), "dtype": str(a.dtype),
               "bitwise_equal": bool(same_bits), "max_abs_diff": max_diff}
        if max_diff > 0 and a.shape == b.shape:
            row["where"] = _where_largest(a, b)
        rows.append(row)
    return {"outputs": rows,
            "bitwise_equal": all(r["bitwise_equal"] for r in rows),
            "max_abs_diff": max((r["max_abs_diff"] for r in rows), default=0.0)}


def within_tolerance(check: dict[str, Any], atol: float) -> bool:
    """The one tolerance rule of a model's verification: bit for bit, or every output within
    ``atol`` of the original's."""
    return bool(check["bitwise_equal"] or check["max_abs_diff"] <= atol)


def verify_outputs(want: list[np.ndarray], got: list[np.ndarray], atol: float
                   ) -> dict[str, Any]:
    """``compare_outputs`` plus the verdict: ``ok`` (``within_tolerance``), ``atol`` and, when
    an output differs, ``worst`` (which output differs most, by how much, where)."""
    check = compare_outputs(want, got)
    worst = _worst(check, None)
    if worst is not None:
        check["worst"] = worst
    return {**check, "ok": within_tolerance(check, atol), "atol": atol}


def verify_rewrite(original: Module, rewritten: Module,
                   inputs: list[np.ndarray],
                   id_cases: dict[str, list[np.ndarray]] | None = None) -> dict[str, Any]:
    """Compare on ``inputs`` and on each of ``id_cases`` (the same inputs with edge-case ids,
    ``runtime.inputs.edge_id_inputs``); the result's totals cover every case, ``cases``
    lists each one's."""
    a, b = compile_module(original), compile_module(rewritten)
    result = compare_outputs(a.run(inputs), b.run(inputs))
    worst = _worst(result, "in_range")
    if id_cases:
        cases = {"in_range": {k: result[k] for k in ("bitwise_equal", "max_abs_diff")}}
        for name, xs in id_cases.items():
            r = compare_outputs(a.run(xs), b.run(xs))
            cases[name] = {k: r[k] for k in ("bitwise_equal", "max_abs_diff")}
            if r["max_abs_diff"] > (worst or {}).get("max_abs_diff", 0.0):
                worst = _worst(r, name)
        result["bitwise_equal"] = all(c["bitwise_equal"] for c in cases.values())
        result["max_abs_diff"] = max(c["max_abs_diff"] for c in cases.values())
        result["cases"] = cases
    if worst is not None:
        result["worst"] = worst
    return result


def _worst(check: dict[str, Any], case: str | None) -> dict[str, Any] | None:
    """Where ``check``'s largest difference is (case, output, index), or None if there is none."""
    rows = [r for r in check["outputs"] if r["max_abs_diff"] > 0]
    if not rows:
        return None
    r = max(rows, key=lambda r: r["max_abs_diff"])
    return {"case": case, "output": r["output"], "where": r.get("where"),
            "max_abs_diff": r["max_abs_diff"]}


def mismatch_line(check: dict[str, Any], atol: float | None,
                  against: str = "the original's") -> str:
    """One line saying how far and where a verification that failed ``within_tolerance``
    differs (``atol`` None: a bit-for-bit check, e.g. an emulated cluster against its native
    kernel)."""
    w = check.get("worst") or {}
    at = "" if w.get("where") is None else f" at index {w['where']}"
    case = f" ({w['case'].replace('_', ' ')} ids)" if w.get("case") else ""
    rule = " (bit for bit expected)" if atol is None else f" (> --verify_atol={atol:g})"
    return (f"output {w.get('output', '?')} differs from {against} by "
            f"{check['max_abs_diff']:.3g}{at}{case}{rule}")


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
