"""``ember-xla place [WORKLOAD.npz] [--target=npu|FILE.toml] [--placement=auto|symmetric|greedy|
optimum|PLAN.json] [--distribution=D] [--batch_size=B] [--plot=P.png] [--json]
[--save_plan=F.json]``: place embedding tables on a multi-core NPU target, emulate the plan and
print it (per core: pieces, strategy, predicted and emulated cycles). Without WORKLOAD, the
MLPerf DLRM-DCNv2 tables with indices from ``--distribution``; a WORKLOAD .npz holds
``rows`` and ``dims`` (one entry per table) and ``ids_<i>`` / ``offsets_<i>`` per table.
``--plot`` draws per-core load of the plan beside the symmetric and greedy baselines."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
from absl import flags

import ember_xla.cli.target_flag  # noqa: F401  (--target)
from ember_xla.orchestrate.errors import UsageError
from ember_xla.util import strict_json
from ember_xla.util.input_files import refuse_special

flags.DEFINE_string("placement", "auto", "place, and emulate on a multi-core target (DAE cores "
                    "such as tmu8, or the NPU): auto (skew-aware mapper; on DAE cores it also "
                    "picks each piece's program), symmetric, greedy, a plan .json, or optimum "
                    "(MILP, small cases, NPU only).")
flags.DEFINE_enum("distribution", "zipf1.05", ["uniform", "zipf0.8", "zipf1.05", "zipf1.2",
                                               "unbalanced"],
                  "place without WORKLOAD: index distribution of the DLRM-DCNv2 tables.")
flags.DEFINE_integer("batch_size", 256, "place without WORKLOAD: samples per batch.",
                     lower_bound=1)
flags.DEFINE_string("plot", None, "place, and emulate on a multi-core target: write a PNG of "
                    "per-core load (the plan and the symmetric/greedy baselines).")
flags.DEFINE_string("save_plan", None, "place, and emulate on a multi-core target: write the "
                    "plan as JSON "
                    "(atomically; reload it with --placement=FILE.json).")
flags.DEFINE_enum("preload", None, ["model", "batch"], "place, emulate on an NPU target: count "
                  "the L1 preload once per model load or in every batch (default: the "
                  "target's scratchpad.preload).")


def load_workload(path: str) -> tuple[list, list]:
    """Tables (lazy rows) and bags from a WORKLOAD .npz; bad files are one-line errors."""
    from ember_xla.emulator.npu.workload import Table, bags

    refuse_special(path)
    try:
        z = np.load(path)
    except (OSError, ValueError) as e:
        raise UsageError(f"{path}: cannot read as .npz: {e}") from None
    for k in ("rows", "dims"):
        if k not in z:
            raise UsageError(f"{path}: {k}: missing (expected one integer per table)")
    rows, dims = z["rows"], z["dims"]
    if rows.ndim != 1 or rows.shape != dims.shape:
        raise UsageError(f"{path}: rows/dims: expected two 1-D arrays of equal length")
    tables, batches = [], []
    for i, (r, d) in enumerate(zip(rows.tolist(), dims.tolist(), strict=True)):
        for k in (f"ids_{i}", f"offsets_{i}"):
            if k not in z:
                raise UsageError(f"{path}: {k}: missing (expected one per table)")
        for k in (f"ids_{i}", f"offsets_{i}"):
            if not np.issubdtype(z[k].dtype, np.integer) or z[k].ndim != 1:
                raise UsageError(f"{path}: {k}: expected a 1-D integer array, got "
                                 f"{z[k].dtype} of shape {z[k].shape}")
        t = Table(f"t{i}", int(r), int(d), seed=i)
        b = bags(z[f"ids_{i}"], z[f"offsets_{i}"])
        b.check(t)
        tables.append(t)
        batches.append(b)
    return tables, batches


def place_main(args: list[str], fl: Any) -> int:
    from ember_xla.placement.api import emulate_plan, format_report, machine, make_plan
    from ember_xla.placement.distributions import dlrm_batches
    from ember_xla.placement.model import workload

    if len(args) > 1:
        raise UsageError("place takes at most one WORKLOAD.npz argument")
    m = machine(fl.target or "npu")
    if args:
        tables, batches = load_workload(args[0])
        profile = None
    else:
        tables, (profile, batches) = dlrm_batches(fl.distribution, fl.batch_size,
                                                  seed=fl.seed)
    w = workload(m, tables, batches, fl.preload, profile=profile,
                 name=Path(fl.target or "npu").stem)
    plan = make_plan(w, fl.placement)
    plan.check(m, w.table_info())
    _, report = emulate_plan(plan, tables, batches, m, w.preload, False, profile)
    if fl.save_plan:
        plan.save(fl.save_plan)
    if fl.plot:
        from ember_xla.placement.plot import plot_loads

        reports = [report]
        for base in ("symmetric", "greedy"):
            if plan.policy != base:
                reports.insert(0, emulate_plan(make_plan(w, base), tables, batches, m,
                                               w.preload, False, profile)[1])
        plot_loads(reports, fl.plot, f"{len(tables)} tables on {m.cores} cores")
    if fl.json:
        d = report.as_dict()
        d["plan"] = plan.to_json()
        print(strict_json.dumps(d, indent=1))
    else:
        print(format_report(report))
        if fl.plot:
            print(f"per-core load: {fl.plot}", file=sys.stderr)
    return 0
