"""Check every ember custom-call of a rewritten module against the computation it replaced, on
the values the model itself gives it.

Each call keeps its outlined computation (``rewrites.outline``): the cluster's own HLO, taking
the call's operands. The probe module is the rewritten module whose entry returns, for every
ember call there, the call's outputs and those of a ``call`` of its outlined computation on
the same operands; XLA:CPU runs both on whatever the model computes for their operands. A
model-level check compares final outputs within a tolerance that allows for the dense layers
around the clusters; this one says, per cluster, whether the kernel computed the values XLA
computes for that cluster.

Rule: a cluster's output is exact when every element has the value XLA's has (NaN where NaN;
the sign of a NaN and of a zero aside). Calls of non-entry computations (a loop body) are
listed as unchecked, with the computation they sit in."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ember_xla.hlo.entry_outputs import append_arrays, return_arrays
from ember_xla.ir.graph import Module
from ember_xla.ir.operation import Operation
from ember_xla.ir.value import Value


@dataclasses.dataclass(frozen=True)
class ProbedCall:
    """One ember call of the probe: its name, target and the number of arrays it returns
    (the probe's outputs hold, per call, those arrays and then the reference's)."""
    name: str
    target: str
    arrays: int


def _is_ember_call(op: Operation) -> bool:
    target = str(op.attributes.get("custom_call_target", ""))
    return op.opcode == "custom-call" and target.startswith("ember.") and len(op.callees) == 1


def probe_module(rewritten: Module, only: set[str] | None = None
                 ) -> tuple[Module, list[ProbedCall], list[str]]:
    """The probe module (of the entry's ember calls named in ``only``, default all), its calls
    in output order, and one line per ember call it does not check (inside a non-entry
    computation). None of the module's own outputs remain: what does not feed a probed call
    is dead and XLA drops it."""
    m = rewritten.clone()
    entry = m.entry
    assert entry is not None
    calls = [op for op in entry.topological() if _is_ember_call(op)
             and (only is None or op.name in only)]
    unchecked = [f"{op.name} (in {g.name})" for g in m.graphs if g is not entry
                 for op in g.ops if _is_ember_call(op)]
    outs: list[Value] = []
    probed = []
    for cc in calls:
        ref = entry.append(Operation("call", list(cc.operands), [cc.result.type], {},
                                     [cc.callees[0]], name=f"{cc.name}.reference"))
        got: list[Value] = []
        want: list[Value] = []
        append_arrays(entry, cc.result, got)
        append_arrays(entry, ref.result, want)
        outs.extend(got + want)
        probed.append(ProbedCall(cc.name, str(cc.attributes["custom_call_target"]), len(got)))
    return_arrays(m, outs, "probe.root")
    return m, probed, unchecked


def _value_diff(want: np.ndarray, got: np.ndarray) -> tuple[float, list[int] | None]:
    """The largest |difference| (``compare.elementwise_diffs``: inf for NaN against a number
    or unequal infinities; 0 for equal values and NaN against NaN) and where."""
    from ember_xla.runtime.compare import elementwise_diffs

    d = elementwise_diffs(want, got)
    if not d.size or not d.max() > 0:
        return 0.0, None
    k = int(np.argmax(d))
    return float(d.flat[k]), [int(i) for i in np.unravel_index(k, d.shape)]


def check_clusters(rewritten: Module, input_sets: dict[str, list[np.ndarray]],
                   in_context: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Run the probe on each named input set. Per call: ``exact`` (same values as the
    outlined computation on every set), ``bitwise_equal``, and when not exact the largest
    difference, the output of the call, the index and the input set. ``exact`` overall;
    ``unchecked`` calls; ``in_context`` (listed when any): calls not probed (their order
    is the one XLA:CPU gives the cluster in the model, where other code shares its products,
    not the one it gives the outlined computation alone: the model's outputs check them)."""
    from ember_xla.runtime.execute import compile_module

    rows: list[dict[str, Any]] = []
    unchecked: list[str] = []
    for part in _parts(rewritten):
        probe, calls, unchecked = probe_module(rewritten, part - in_context)
        part_rows = [{"call": c.name, "target": c.target, "exact": True,
                      "bitwise_equal": True, "max_abs_diff": 0.0} for c in calls]
        rows.extend(part_rows)
        if calls:
            _run_probe(compile_module(probe), calls, part_rows, input_sets)
    check = {"calls": rows, "exact": all(r["exact"] for r in rows), "unchecked": unchecked}
    if in_context:
        check["in_context"] = sorted(in_context)
    return check


def _parts(rewritten: Module) -> list[set[str]]:
    """The entry's ember calls in groups, one probe each: as many calls per probe as keep its
    inputs and outputs (each call's results twice) within ``EMBER_XLA_MAX_RUN_BYTES``, as
    the model-level check's run is kept (a training step's fused updates return whole
    tables); a call above the budget alone is a probe of its own."""
    from ember_xla.runtime.inputs import max_run_bytes, shape_bytes

    entry = rewritten.entry
    assert entry is not None
    room = max_run_bytes() - sum(shape_bytes(p.result.type) for p in entry.params())
    parts: list[set[str]] = []
    used = 0
    for op in entry.topological():
        if not _is_ember_call(op):
            continue
        need = 2 * shape_bytes(op.result.type)
        if not parts or used + need > room:
            parts.append(set())
            used = 0
        parts[-1].add(op.name)
        used += need
    return parts or [set()]


def _run_probe(exe: Any, calls: list[ProbedCall], rows: list[dict[str, Any]],
               input_sets: dict[str, list[np.ndarray]]) -> None:
    """Run one probe on every input set and record, per call, how far it is from XLA."""
    for case, xs in input_sets.items():
        outs = exe.run(xs)
        k = 0
        for c, row in zip(calls, rows, strict=True):
            got, want = outs[k:k + c.arrays], outs[k + c.arrays:k + 2 * c.arrays]
            k += 2 * c.arrays
            for i, (a, b) in enumerate(zip(want, got, strict=True)):
                if record_difference(row, a, b, {"output": i, "case": case}):
                    row["bitwise_equal"] = False


def record_difference(row: dict[str, Any], want: np.ndarray, got: np.ndarray,
                      where_from: dict[str, Any]) -> bool:
    """Whether ``got``'s bits differ from ``want``'s; when its values differ more than
    ``row``'s largest difference so far, ``row`` becomes not ``exact`` and records the
    difference, the index, XLA's value there and ``where_from`` (which array, which input
    set)."""
    if want.tobytes() == got.tobytes():
        return False
    diff, where = _value_diff(want, got)
    if diff > row["max_abs_diff"]:
        row.update(exact=False, max_abs_diff=diff, where=where, **where_from,
                   reference=float(np.asarray(want, np.float64)[tuple(where or ())]))
    return True


def cluster_mismatch_line(check: dict[str, Any]) -> str:
    """One line naming the call whose values differ most from XLA's for its cluster."""
    bad = max((r for r in check["calls"] if not r["exact"]), key=lambda r: r["max_abs_diff"])
    part = f" output {bad['output']}" if bad.get("output") else ""
    case = f" ({bad['case'].replace('_', ' ')} ids)" if bad.get("case") else ""
    return (f"cluster {bad['call']} ({bad['target']}){part} differs from its outlined "
            f"computation on XLA:CPU by {bad['max_abs_diff']:.3g} at index {bad['where']}"
            f"{case}, where XLA computes {bad['reference']:.9g}")
