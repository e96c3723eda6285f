"""Check each value the canonicalization replaced against what replaced it, on XLA:CPU, in
the model.

The probe (``rewrites.canonicalize.probe``) gives two modules with the model's parameters:
the original and the canonical model, each returning the model's own arrays and then, per
replacement, the original value and its canonical stand-in. XLA:CPU runs both on every input
set of the model-level check. Rule, as for the clusters (``cluster_check``): a replacement is
exact when every element has the value XLA gives the original (NaN where NaN; the sign of a
NaN and of a zero aside)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ember_xla.runtime.cluster_check import record_difference


def check_replacements(probe: Any, input_sets: dict[str, list[np.ndarray]]) -> dict[str, Any]:
    """Run both modules of ``probe`` (``rewrites.canonicalize.probe.CanonicalProbe``:
    ``original``, ``canonical``, ``model_arrays``, ``replacements`` in output order, each with
    ``instruction``, ``opcode``, ``canonical`` and ``arrays``, and ``unchecked``) on each named
    input set. Per replacement: ``exact``, and when not, the largest difference, the array, the
    index, the input set and the original's value there. ``exact`` overall; ``checked`` (how
    many); ``unchecked`` (inside computations the entry still calls)."""
    from ember_xla.runtime.execute import compile_module

    rows = [{"instruction": r.instruction, "opcode": r.opcode, "canonical": r.canonical,
             "exact": True, "max_abs_diff": 0.0} for r in probe.replacements]
    if rows:
        want_exe, got_exe = compile_module(probe.original), compile_module(probe.canonical)
        for case, xs in input_sets.items():
            want = want_exe.run(xs)[probe.model_arrays:]
            got = got_exe.run(xs)[probe.model_arrays:]
            k = 0
            for r, row in zip(probe.replacements, rows, strict=True):
                for i in range(r.arrays):
                    record_difference(row, want[k + i], got[k + i], {"array": i, "case": case})
                k += r.arrays
    bad = [r for r in rows if not r["exact"]]
    return {"exact": not bad, "checked": len(rows), "unchecked": probe.unchecked,
            "mismatches": bad}


def replacement_mismatch_line(check: dict[str, Any]) -> str:
    """One line naming the replaced value whose canonical form differs most from it."""
    bad = max(check["mismatches"], key=lambda r: r["max_abs_diff"])
    case = f" ({bad['case'].replace('_', ' ')} ids)" if bad.get("case") else ""
    return (f"the canonicalization changed the values of {bad['instruction']} "
            f"({bad['opcode']}, made a {bad['canonical']}): by {bad['max_abs_diff']:.3g} at "
            f"index {bad['where']}{case}, where XLA computes {bad['reference']:.9g}")
