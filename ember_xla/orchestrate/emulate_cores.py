"""``ember-xla emulate MODEL --target=<multi-core DAE target> --placement=...``: every
embedding cluster of a model placed on the cores of a DAE machine (``configs/tmu8.toml``) and
emulated in one run, contention for the shared LLC and DRAM included.

One XLA:CPU run of the rewritten module (native kernels) captures each cluster's operands and
results (``emulator/capture.py``); each cluster's program variants run on its whole batch
(``placement/dae/workload.py``: checked bit for bit against the native kernel, a difference
failing the run with exit 1, profiled for the cost model); the plan (auto, symmetric, greedy
or a file) cuts the clusters into pieces; each piece's program runs on its share of the batch
in the C++ executor, the shares' outputs stacked must equal the native kernel's bit for bit,
and all pieces are timed together on the cores (``emulator/cores.py``). The model's outputs
(the native kernels', equal to the pieces') are compared with the original module's on XLA:CPU
by the one rule (``verify_outputs``: ``--verify_atol + --verify_rtol x |original|``).

With ``engine="fast"`` (the ``ember-xla emulate`` default) every run is in the executor's
addresses mode where the program allows: the same traces, hence the same timing, without
computing values; those clusters' outputs are the native kernels' (listed in the verdict as
``clusters_outputs_native``), the others are checked as above."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ember_xla.emulator.cores import CoresTiming, OnCore, simulate_cores
from ember_xla.ir.graph import Module
from ember_xla.machines.config import Target
from ember_xla.placement.dae.mapper import make_plan, price
from ember_xla.placement.dae.plan import DaePlan, check_plan, read_plan
from ember_xla.placement.dae.workload import ClusterWork, cluster_work
from ember_xla.runtime.compare import VERIFY_ATOL, VERIFY_RTOL

#: The engines of a multi-core run (``full``: every value computed, checked per cluster).
CORE_ENGINES = ("full", "fast")


class NotPlaceable(ValueError):
    """A cluster the DAE cores cannot run (and no --native_fallback), or nothing to place."""


@dataclasses.dataclass
class CoresRun:
    target: Target
    plan: DaePlan
    works: list[ClusterWork]
    timing: CoresTiming
    fallback: list[tuple[str, str]]           # (cluster, why) run on the native kernel
    outputs: list[np.ndarray]
    verify: dict[str, Any]
    baselines: list[tuple[DaePlan, CoresTiming]] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.verify["ok"])

    @property
    def makespan(self) -> float:
        return self.timing.makespan


def plan_for(target: Target, works: list[ClusterWork], placement: str,
             cores: int | None = None) -> DaePlan:
    """The plan a ``--placement`` value names: a policy, or a JSON file checked and priced."""
    n = target.cores if cores is None else cores
    if placement.endswith(".json"):
        plan = read_plan(placement)
        check_plan(plan, [c.rows for c in works], [c.variants for c in works], n, placement)
        return price(target, works, plan)
    return make_plan(placement, target, works, n)


def run_plan(target: Target, works: list[ClusterWork], plan: DaePlan
             ) -> tuple[CoresTiming, list[dict[str, Any]]]:
    """Run every piece, check the stacked shares against the native results, time the plan."""
    from ember_xla.runtime.compare import verify_outputs

    placed, got = [], {c.index: [] for c in works}
    modes: dict[int, list[Any]] = {c.index: [] for c in works}
    for p in plan.pieces:
        c = works[p.cluster]
        run = c.run(p.variant, p.start, p.stop, target)
        got[p.cluster].append((p.start, run.outputs))
        modes[p.cluster].append(run)
        placed.append(OnCore(run, p.core, p.cluster))
    checks = []
    for c in works:
        if any(run.mode != "full" for run in modes[c.index]):
            continue  # timed from its addresses: no emulated outputs (run_checks lists it)
        parts = [outs for _, outs in sorted(got[c.index], key=lambda x: x[0])]
        if not parts:
            stacked = [np.zeros(o.shape, o.dtype) for o in c.results]
        else:
            stacked = [np.concatenate([q[i] for q in parts]) for i in range(len(c.results))]
        v = verify_outputs(c.results, stacked, 0.0, 0.0)
        checks.append({"index": c.index, "custom_call": c.name,
                       "bitwise_equal": v["bitwise_equal"], "max_abs_diff": v["max_abs_diff"],
                       "pieces": len(parts), **({"worst": v["worst"]} if "worst" in v else {})})
    timing = simulate_cores(target, placed, plan.cores)
    for p in placed:
        p.run.close()
    return timing, checks


def cluster_works(rewritten: Module, cap: Any, target: Target, native_fallback: bool,
                  fast: bool = False) -> tuple[list[ClusterWork], list[tuple[str, str]]]:
    """Every ember call of ``rewritten`` as placement sees it (``cap``: a captured run), and
    the ones the DAE cores cannot run, with why (an error unless ``native_fallback``);
    ``fast``: their runs in the addresses mode where the program allows."""
    from ember_xla.call_specs import LoweringRefused, cluster_spec, ember_calls

    works, fallback = [], []
    for call in ember_calls(rewritten):
        try:
            spec = cluster_spec(call)
            w = cluster_work(len(works), spec, cap.operands[call.name], cap.results[call.name],
                             target, fast=fast)
        except (LoweringRefused, ValueError) as e:
            why = " ".join(str(e).split())
            if not native_fallback:
                raise NotPlaceable(f"cluster %{call.name}: the DAE cores cannot run it: {why} "
                                   "(--native_fallback runs it on the native kernel and "
                                   "reports it)") from None
            fallback.append((call.name, why))
            continue
        works.append(w)
    if not works:
        raise NotPlaceable("no cluster of the model can run on the DAE cores" + (
            ": " + "; ".join(f"%{n}: {w}" for n, w in fallback) if fallback else
            " (it has no embedding cluster)"))
    return works, fallback


def emulate_on_cores(original: Module, rewritten: Module, inputs: list[np.ndarray],
                     target: Target, placement: str, *, native_fallback: bool = False,
                     baselines: bool = False, verify_atol: float = VERIFY_ATOL,
                     verify_rtol: float = VERIFY_RTOL, cores: int | None = None,
                     engine: str = "full") -> CoresRun:
    """Place and emulate ``rewritten``'s clusters on ``target``'s cores (or ``cores``);
    ``baselines``: also run the symmetric and greedy plans (for the per-core load plot);
    ``engine``: ``full`` (every value computed and checked) or ``fast`` (the addresses mode
    where the programs allow)."""
    from ember_xla.emulator.capture import capture
    from ember_xla.orchestrate.errors import ModelFailed
    from ember_xla.placement.dae.workload import VariantMismatch
    from ember_xla.runtime.compare import verify_outputs
    from ember_xla.runtime.execute import run_module

    if engine not in CORE_ENGINES:
        raise ValueError(f"engine {engine!r}: expected one of {', '.join(CORE_ENGINES)}")
    cap = capture(rewritten, inputs)
    try:
        works, fallback = cluster_works(rewritten, cap, target, native_fallback,
                                        engine == "fast")
    except VariantMismatch as e:  # a failed check, not a cluster to fall back from
        raise ModelFailed(f"emulate: {e}; nothing written") from None
    plan = plan_for(target, works, placement, cores)
    timing, checks = run_plan(target, works, plan)
    model_check = verify_outputs(run_module(original, inputs), cap.outputs, verify_atol,
                                 verify_rtol)
    checked = {c["index"] for c in checks}
    verify = {"model": model_check, "clusters_vs_native": checks,
              "ok": model_check["ok"] and all(c["bitwise_equal"] for c in checks)}
    if engine == "fast":
        verify["clusters_outputs_native"] = [{"index": c.index, "custom_call": c.name}
                                             for c in works if c.index not in checked]
    base = []
    if baselines:
        for policy in ("symmetric", "greedy", "auto"):
            if policy != plan.policy:
                p = make_plan(policy, target, works, plan.cores)
                base.append((p, run_plan(target, works, p)[0]))
    return CoresRun(target, plan, works, timing, fallback, cap.outputs, verify, base)
