"""Run an original and a rewritten module on the same inputs and compare the outputs by the one
verdict rule of every model-level verification (``rewrite --verify``, ``batch``, ``emulate``,
``place``); time modules side by side.

The rule: an output passes when it equals the original's bit for bit, or when every element
``g`` of it and ``w`` of the original's are the same value (equal infinities, NaN where NaN) or
``|g - w| <= atol + rtol * |w|`` (``--verify_atol``, ``--verify_rtol``; defaults
``VERIFY_ATOL``, ``VERIFY_RTOL``). An emulated cluster against its native kernel is checked
bit for bit (``atol = rtol = 0`` and ``bitwise_equal``)."""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np

from ember_xla.ir.graph import Module
from ember_xla.runtime.execute import compile_module

#: The absolute part of the tolerance: an output element near zero may differ by this much.
VERIFY_ATOL = 1e-4
#: The relative part: ``rtol * |original|`` more (1e-5 is about 84 f32 ulp of the element):
#: what reassociated or differently fused dense layers around the rewritten clusters round to.
VERIFY_RTOL = 1e-5


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


def elementwise_diffs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``|a - b|`` per element as f64 (floats: ``_float_diffs``; integers exactly)."""
    if a.dtype.kind in "fc" or str(a.dtype) == "bfloat16":
        return _float_diffs(a, b)
    return np.abs(a.astype(np.int64) - b.astype(np.int64)).astype(np.float64)


def _ratios(a: np.ndarray, diff: np.ndarray, atol: float, rtol: float) -> np.ndarray:
    """Each element's difference over what the rule allows it (> 1: beyond the tolerance)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        mag = np.abs(a.astype(np.float64))
        allowed = atol + rtol * np.where(np.isfinite(mag), mag, 0.0)
        out = np.where(diff == 0, 0.0, diff / allowed)  # nothing allowed: inf
    return np.where(np.isnan(out), np.inf, out)


def _index(flat: int, shape: tuple[int, ...]) -> list[int]:
    return [int(k) for k in np.unravel_index(flat, shape)]


def compare_outputs(want: list[np.ndarray], got: list[np.ndarray], atol: float = VERIFY_ATOL,
                    rtol: float = VERIFY_RTOL) -> dict[str, Any]:
    """Per output: bit equality, the largest difference and where, and ``tolerance_ratio``
    (the largest difference over ``atol + rtol * |original|``, at ``beyond`` when > 1)."""
    rows = []
    for i, (a, b) in enumerate(zip(want, got, strict=True)):
        same_bits = a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()
        row: dict[str, Any] = {"output": i, "shape": list(a.shape), "dtype": str(a.dtype),
                               "bitwise_equal": bool(same_bits), "max_abs_diff": 0.0,
                               "tolerance_ratio": 0.0}
        if a.shape != b.shape:
            row["max_abs_diff"] = row["tolerance_ratio"] = float("inf")
        elif a.size and not same_bits:
            diff = elementwise_diffs(a, b)
            ratio = _ratios(a, diff, atol, rtol)
            k, r = int(np.argmax(diff)), int(np.argmax(ratio))
            if np.isinf(ratio.flat[r]):  # nothing allowed there: the largest such difference
                r = int(np.argmax(np.where(np.isinf(ratio), diff, -1.0)))
            row["max_abs_diff"], row["tolerance_ratio"] = float(diff.flat[k]), float(ratio.flat[r])
            if row["max_abs_diff"] > 0:
                row["where"] = _index(k, a.shape)
            if row["tolerance_ratio"] > 1:
                at = _index(r, a.shape)
                row["beyond"] = {"where": at, "diff": float(diff.flat[r]),
                                 "original": float(np.asarray(a, np.float64).flat[r])}
        rows.append(row)
    return {"outputs": rows,
            "bitwise_equal": all(r["bitwise_equal"] for r in rows),
            "max_abs_diff": max((r["max_abs_diff"] for r in rows), default=0.0),
            "tolerance_ratio": max((r["tolerance_ratio"] for r in rows), default=0.0)}


def equal_values_note(check: dict[str, Any]) -> str:
    """" (...)" when ``check`` (``compare_outputs``) differs in bits but in no value: NaN
    payloads (a NaN's sign) or zeros' signs; else ""."""
    if check["bitwise_equal"] or check["max_abs_diff"] != 0:
        return ""
    return " (equal values: only NaN payloads or signs of zeros differ)"


def within_tolerance(check: dict[str, Any]) -> bool:
    """The one tolerance rule of a model's verification: bit for bit, or every element of
    every output within ``atol + rtol * |original|`` of the original's (``compare_outputs``'s
    ``tolerance_ratio`` at most 1)."""
    return bool(check["bitwise_equal"] or check["tolerance_ratio"] <= 1.0)


def verify_outputs(want: list[np.ndarray], got: list[np.ndarray], atol: float,
                   rtol: float = VERIFY_RTOL) -> dict[str, Any]:
    """``compare_outputs`` plus the verdict: ``ok`` (``within_tolerance``), ``atol``, ``rtol``
    and, when an output differs, ``worst`` (the output beyond the tolerance by most, else the
    one that differs most: by how much, where)."""
    check = compare_outputs(want, got, atol, rtol)
    worst = _worst(check, None)
    if worst is not None:
        check["worst"] = worst
    return {**check, "ok": within_tolerance(check), "atol": atol, "rtol": rtol}


_TOTALS = ("bitwise_equal", "max_abs_diff", "tolerance_ratio")


def verify_rewrite(original: Module, rewritten: Module,
                   inputs: list[np.ndarray],
                   id_cases: dict[str, list[np.ndarray]] | None = None,
                   atol: float = VERIFY_ATOL, rtol: float = VERIFY_RTOL) -> dict[str, Any]:
    """Compare on ``inputs`` and on each of ``id_cases`` (the same inputs with edge-case ids,
    ``runtime.inputs.edge_id_inputs``); the result's totals cover every case, ``cases``
    lists each one's."""
    a, b = compile_module(original), compile_module(rewritten)
    result = compare_outputs(a.run(inputs), b.run(inputs), atol, rtol)
    worst = _worst(result, "in_range")
    if id_cases:
        cases = {"in_range": {k: result[k] for k in _TOTALS}}
        for name, xs in id_cases.items():
            r = compare_outputs(a.run(xs), b.run(xs), atol, rtol)
            cases[name] = {k: r[k] for k in _TOTALS}
            w = _worst(r, name)
            if w is not None and _rank(w) > _rank(worst):
                worst = w
        for k in _TOTALS:
            result[k] = (all(c[k] for c in cases.values()) if k == "bitwise_equal"
                         else max(c[k] for c in cases.values()))
        result["cases"] = cases
    if worst is not None:
        result["worst"] = worst
    result["atol"], result["rtol"] = atol, rtol
    if not within_tolerance(result) and worst is not None:
        xs = inputs if worst["case"] in (None, "in_range") else (id_cases or {})[worst["case"]]
        why = xla_self_disagreement(original, b.run(xs), xs, atol, rtol)
        if why:
            result["diagnosis"] = why
    return result


#: XLA:CPU's offload of fusions to YNNPACK, off: the original's own result without it.
NO_YNN = {"xla_cpu_experimental_ynn_fusion_type": ""}


def xla_self_disagreement(original: Module, got: list[np.ndarray], inputs: list[np.ndarray],
                          atol: float, rtol: float) -> str | None:
    """When the rewrite's outputs ``got`` differ from the original's, whether XLA:CPU
    disagrees with itself on the original: compiled with its YNNPACK fusions off, does the
    original give other outputs, equal to the rewrite's? Then the mismatch is XLA:CPU's
    (jaxlib's YNNPACK fusions have miscompiled modules, e.g. a reduce fused into a dot with a
    broadcast constant operand); the sentence says so. None otherwise, or when the check
    cannot run. Short: the error line keeps its last 180 characters."""
    from ember_xla.runtime.xla_cpu import XlaError

    try:
        plain = compile_module(original, NO_YNN).run(inputs)
        default = compile_module(original).run(inputs)
    except XlaError:
        return None
    if within_tolerance(compare_outputs(default, plain, atol, rtol)):
        return None
    if not within_tolerance(compare_outputs(plain, got, atol, rtol)):
        return None
    return ("XLA:CPU miscompiles the original: without its YNNPACK fusions (XLA_FLAGS="
            "--xla_cpu_experimental_ynn_fusion_type=) it gives the rewrite's outputs")


def _rank(w: dict[str, Any] | None) -> tuple[bool, float]:
    """Worse first: beyond the tolerance, then by how much (ratio, else difference)."""
    if w is None:
        return (False, 0.0)
    beyond = w["tolerance_ratio"] > 1
    return (beyond, w["tolerance_ratio"] if beyond else w["max_abs_diff"])


def _worst(check: dict[str, Any], case: str | None) -> dict[str, Any] | None:
    """The output beyond the tolerance by most (case, output, index, difference, the
    original's value), else the one whose difference is largest; None if none differs."""
    rows = [r for r in check["outputs"] if r["max_abs_diff"] > 0 or not r["bitwise_equal"]]
    if not rows:
        return None
    beyond = [r for r in rows if r["tolerance_ratio"] > 1]
    if beyond:
        r = max(beyond, key=lambda r: r["tolerance_ratio"])
        b = r.get("beyond") or {}
        return {"case": case, "output": r["output"], "where": b.get("where"),
                "max_abs_diff": b.get("diff", r["max_abs_diff"]),
                "original": b.get("original"), "tolerance_ratio": r["tolerance_ratio"]}
    r = max(rows, key=lambda r: r["max_abs_diff"])
    return {"case": case, "output": r["output"], "where": r.get("where"),
            "max_abs_diff": r["max_abs_diff"], "tolerance_ratio": r["tolerance_ratio"]}


def mismatch_line(check: dict[str, Any], atol: float | None,
                  against: str = "the original's", rtol: float | None = None) -> str:
    """One line saying which output, where and by how much a verification that failed
    ``within_tolerance`` differs (``atol`` None: a bit-for-bit check, e.g. an emulated cluster
    against its native kernel; ``rtol`` None: the check's own)."""
    w = check.get("worst") or {}
    at = "" if w.get("where") is None else f" at index {w['where']}"
    case = f" ({w['case'].replace('_', ' ')} ids)" if w.get("case") else ""
    if atol is None:
        rule = " (bit for bit expected)"
    else:
        r = check.get("rtol", VERIFY_RTOL) if rtol is None else rtol
        was = "" if w.get("original") is None else f"{against} {w['original']:.6g}, "
        rule = f" ({was}> --verify_atol={atol:g} + --verify_rtol={r:g} x |original|)"
    diff = w.get("max_abs_diff", check["max_abs_diff"])
    return (f"output {w.get('output', '?')} differs from {against} by "
            f"{diff:.3g}{at}{case}{rule}")


#: Seconds a timing sample of a fast module lasts at least (``time_modules``).
BLOCK_S = 2e-3


def time_modules(modules: dict[str, Module], inputs: list[np.ndarray],
                 repeats: int = 10) -> dict[str, float]:
    """Median seconds per run of each module, samples interleaved (one warm-up each; a sample
    of a module faster than ``BLOCK_S`` is the mean of a block of runs lasting about that). Inputs
    are placed on the device once, as a model's weights and a batch would be; parameters a
    module donates (a training step's ``input_output_alias``: its run consumes their buffers)
    get fresh device copies before each run, outside the timed region."""
    import jax

    exes = {k: compile_module(m) for k, m in modules.items()}
    donated = {k: m.donated_parameters() for k, m in modules.items()}
    with jax.enable_x64(True):
        host = [np.asarray(a) for a in inputs]
        on_device = [jax.device_put(a) for a in host]

    def operands(k: str) -> list:
        if not donated[k]:
            return on_device
        with jax.enable_x64(True):
            fresh = [jax.device_put(host[i]) if i in donated[k] else a
                     for i, a in enumerate(on_device)]
        return jax.block_until_ready(fresh)

    once = {}
    for k, e in exes.items():
        jax.block_until_ready(e.run_device(operands(k)))
        t0 = time.perf_counter()
        jax.block_until_ready(e.run_device(operands(k)))
        once[k] = time.perf_counter() - t0
    # a sample of a fast module is a block of runs of about BLOCK_S (one run is the machine's
    # noise, not the module's time); a donating module runs once per sample (fresh operands)
    calls = {k: 1 if donated[k] else max(1, min(100, int(BLOCK_S / max(once[k], 1e-7))))
             for k in exes}
    times: dict[str, list[float]] = {k: [] for k in exes}
    for _ in range(repeats):
        for k, e in exes.items():
            args = operands(k)
            t0 = time.perf_counter()
            for _ in range(calls[k]):
                out = e.run_device(args)
            jax.block_until_ready(out)
            times[k].append((time.perf_counter() - t0) / calls[k])
    return {k: statistics.median(v) for k, v in times.items()}
