"""Emulate every ember cluster of a rewritten model on a DAE target and verify the outputs: the
library function behind ``ember-xla emulate`` and ``ember_xla.jit(..., mode="emulate")``.

Each cluster is compiled to a bound DAE program (``compile.py``). Engines:

- ``fast`` (the default when the C++ emulator is built): the model runs on XLA:CPU with the
  native kernels, capturing each cluster's operands and results (``capture.py``); each
  cluster's outputs are its native kernel's, its timing comes from the C++ executor's
  addresses mode (``emulator/fast_engine.py``: the same trace, hence the same report, as the
  full executor, without computing values). A program the addresses mode cannot run (its
  addresses depend on computed data) runs in the full mode and its outputs are compared with
  the native kernel's. When a cluster's operands cannot be captured (inside a nested
  computation) the default is the ``xla`` engine.
- ``xla`` (the full functional executor; ``--engine=xla``): every ``ember.*`` call is
  replaced by an ``ember.emulate`` call carrying its program and the target, and the whole
  model runs on XLA:CPU with the emulated clusters, returning each cluster's results too; the
  cycles come from the C++ emulator's per-run report log. Each cluster's emulated results
  must equal its native kernel's bit for bit (a run of the model with the native kernels,
  ``capture.py``).
- ``python``: the model runs on XLA:CPU with the native kernels, capturing each cluster's
  operands and results (``capture.py``); the Python reference emulator runs each cluster's
  program on its operands, and its outputs must equal the native kernel's bit for bit (so the
  model's outputs with the emulated clusters are the ones computed).

Either way the model's outputs are compared with the original module's on XLA:CPU by the one
rule of ``runtime.compare`` (``verify_outputs``: bit for bit, or every element within
``--verify_atol + --verify_rtol x |original|``; the dense part of a model may round
differently around the rewritten clusters), each check naming the output and the index beyond
the tolerance by most; and
``--trace`` re-runs each cluster on the Python reference with the timing model recording
events (with the xla engine its cycles must equal the C++ emulator's, else the run fails).
A cluster the lowering refuses is an error unless ``native_fallback``: then it runs on the
native kernel and the report says so."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import numpy as np

from ember_xla.emulator.report import ClusterResult, EmulationReport
from ember_xla.ir.graph import Module
from ember_xla.machines.config import Target
from ember_xla.orchestrate.compile_clusters import CompiledCluster, compile_clusters
from ember_xla.runtime.compare import VERIFY_ATOL, VERIFY_RTOL
from ember_xla.util import strict_json

ENGINES = ("auto", "fast", "xla", "python")
#: The engine as reports name it.
ENGINE_NAMES = {"fast": "C++ fast", "xla": "C++ in XLA", "python": "Python reference"}


class ClusterRefused(ValueError):
    """The DAE lowering refused a cluster and native fallback was not allowed."""


@dataclasses.dataclass
class EmulateOptions:
    target: Target
    level: int | str = 3
    engine: str = "auto"
    native_fallback: bool = False
    trace_path: str | None = None
    verify_atol: float = VERIFY_ATOL
    verify_rtol: float = VERIFY_RTOL
    max_trace_events: int = 500_000


@dataclasses.dataclass
class Emulated:
    report: EmulationReport
    outputs: list[np.ndarray]
    ok: bool                          # outputs verified


def fast_engine_available() -> bool:
    from ember_xla.emulator.cc_library import EmulatorLibraryMissing, load

    try:
        load()
    except EmulatorLibraryMissing:
        return False
    return True


def xla_engine_available() -> bool:
    try:
        from ember_xla.emulator import xla_call  # noqa: F401
    except ImportError:
        return False
    return True


def _refusals(compiled: list[CompiledCluster], fallback: bool) -> None:
    for c in compiled:
        if c.refused is not None and not fallback:
            raise ClusterRefused(f"cluster {c.index} (%{c.name}, {c.kind}): the DAE lowering "
                                 f"refused it: {c.refused} (--native_fallback runs it on the "
                                 "native kernel and reports it)")


def run_reference(program: Any, operands: list[np.ndarray], target: Target,
                  recorder: Any = None) -> tuple[list[np.ndarray], Any]:
    """The Python reference emulator on one cluster: (outputs, TimingReport)."""
    from ember_xla.emulator.reference import run_program
    from ember_xla.emulator.timing import simulate

    outs, trace = run_program(program, operands)
    return [np.asarray(o) for o in outs], simulate(target, trace, recorder)


def _compare_cluster(c: CompiledCluster, got: list[np.ndarray], want: list[np.ndarray]
                     ) -> dict[str, Any]:
    """The per-cluster verdict: the emulated outputs equal the native kernel's bit for bit;
    ``worst`` says which output differs most and where."""
    from ember_xla.runtime.compare import verify_outputs

    v = verify_outputs(want, got, 0.0, 0.0)
    check = {"index": c.index, "custom_call": c.name, "bitwise_equal": v["bitwise_equal"],
             "max_abs_diff": v["max_abs_diff"]}
    if "worst" in v:
        check["worst"] = v["worst"]
    return check


def emulate_module(original: Module, rewritten: Module, inputs: list[np.ndarray],
                   opts: EmulateOptions, source: str = "") -> Emulated:
    """Compile, emulate and verify; ``original`` is the module before the rewrite. The trace
    (``opts.trace_path``) is written only when the outputs verified."""
    from ember_xla.emulator.capture import NotCapturable, capture
    from ember_xla.runtime.compare import verify_outputs
    from ember_xla.runtime.execute import run_module

    if opts.engine not in ENGINES:
        raise ValueError(f"--engine={opts.engine}: expected one of {', '.join(ENGINES)}")
    engine = opts.engine
    if engine == "auto":
        engine = "fast" if fast_engine_available() else "python"
    compiled = compile_clusters(rewritten, opts.target, opts.level)
    _refusals(compiled, opts.native_fallback)
    emulated = [c for c in compiled if c.refused is None]
    level = str(opts.level).lstrip("-")
    level = level if level.startswith("O") else f"O{level}"
    results: dict[int, ClusterResult] = {
        c.index: ClusterResult(c.index, c.name, c.kind, None, refused=c.refused)
        for c in compiled}
    cluster_checks: list[dict[str, Any]] = []
    try:  # the native kernels: each cluster's reference
        cap = capture(rewritten, inputs,
                      engine in ("python", "fast") or opts.trace_path is not None)
    except NotCapturable as e:
        if engine == "fast" and opts.engine == "auto" and opts.trace_path is None \
                and xla_engine_available():
            engine = "xla"  # the nested clusters are emulated inside the model
        elif engine == "fast":
            raise NotCapturable(f"{e}: the fast engine times each cluster on its captured "
                                "operands (--engine=xla emulates it inside the model)") from None
        elif engine == "python" or opts.trace_path is not None:
            raise
        cap = None  # the model's check only (listed in the report as unchecked)
    recorders: dict[int, Any] = {}
    native: list[dict[str, Any]] = []  # fast engine: clusters whose outputs are the kernels'
    if engine == "fast":
        from ember_xla.emulator.fast_engine import FULL, time_cluster

        assert cap is not None
        outputs = cap.outputs
        for c in emulated:
            ft = time_cluster(c.program, cap.operands[c.name], cap.results[c.name],
                              opts.target)
            results[c.index].timing = ft.timing
            if ft.mode == FULL:
                cluster_checks.append(_compare_cluster(c, ft.outputs, cap.results[c.name]))
            else:
                native.append({"index": c.index, "custom_call": c.name})
    elif engine == "xla":
        from ember_xla.emulator.xla_call import run_emulated

        run, timings = run_emulated(rewritten, emulated, inputs, opts.target)
        outputs = run.outputs
        for c in emulated:
            results[c.index].timing = timings[c.name]
            if cap is not None and c.name in run.results:  # emulated in the model vs native
                cluster_checks.append(_compare_cluster(c, run.results[c.name],
                                                       cap.results[c.name]))
    else:
        assert cap is not None
        outputs = cap.outputs
    if cap is not None and (engine == "python" or opts.trace_path is not None):
        from ember_xla.emulator.recorder import EventRecorder

        for c in emulated:
            rec = EventRecorder() if opts.trace_path is not None else None
            got, timing = run_reference(c.program, cap.operands[c.name], opts.target, rec)
            if engine == "python":
                results[c.index].timing = timing
                cluster_checks.append(_compare_cluster(c, got, cap.results[c.name]))
            else:  # both engines ran: the C++ emulator's cycles must be the reference's
                equal = results[c.index].timing.cycles == timing.cycles
                for check in cluster_checks + native:
                    if check["index"] == c.index:
                        check["cpp_cycles_equal"] = equal
            if rec is not None:
                recorders[c.index] = (rec, timing.cycles)
    want = run_module(original, inputs)
    model_check = verify_outputs(want, outputs, opts.verify_atol, opts.verify_rtol)
    model_ok = model_check["ok"]
    clusters_ok = all(x["bitwise_equal"] and x.get("cpp_cycles_equal", True)
                      for x in cluster_checks) and all(x.get("cpp_cycles_equal", True)
                                                       for x in native)
    report = EmulationReport(opts.target, level, [results[c.index] for c in compiled],
                             source=source, engine=ENGINE_NAMES[engine])
    unchecked = [c.name for c in emulated
                 if not any(x["index"] == c.index for x in cluster_checks + native)]
    report.verify = {"model": model_check, "clusters_vs_native": cluster_checks,
                     "clusters_unchecked": unchecked, "ok": model_ok and clusters_ok}
    if engine == "fast":
        report.verify["clusters_outputs_native"] = native
    if opts.trace_path is not None and model_ok and clusters_ok:
        from ember_xla.emulator.perfetto import TracedRun, write_trace

        runs = [TracedRun(f"cluster {k} %{results[k].custom_call}", opts.target, rec, cyc)
                for k, (rec, cyc) in sorted(recorders.items())]
        report.trace_events = write_trace(opts.trace_path, runs, opts.max_trace_events)
    return Emulated(report, outputs, model_ok and clusters_ok)


DEFAULT_TARGET = "tmu"
DEFAULT_LEVEL = 3


def emulate_model(model: Any, target_name: str, level: int, inputs: Any, *, engine: str = "auto",
                  native_fallback: bool = False, trace: str | None = None,
                  group: bool = True, verify_atol: float = VERIFY_ATOL,
                  verify_rtol: float = VERIFY_RTOL, say: Any = None) -> Any:
    """Rewrite (every cluster: the DAE machine is the target, not the CPU cost model),
    compile, emulate and verify one imported model; returns ``Emulated``."""
    from ember_xla.machines.config import load_target
    from ember_xla.orchestrate.rewrite_model import rewrite_for

    target = load_target(target_name)
    result = rewrite_for(model.module, "dae", group=group)
    opts = EmulateOptions(target, level, engine, native_fallback, trace, verify_atol,
                          verify_rtol)
    em = emulate_module(model.module, result.module, inputs, opts, source=model.source)
    if say:  # after the run: an error is then the only line on stderr
        say(f"{model.source}: {len(result.clusters)} embedding cluster(s) rewritten, emulated "
            f"at -O{level} on {target.name} ({target.source}), {em.report.engine} engine")
    return em


def batch_action(model: Any, rewritten: Any, out_dir: str, options: dict[str, Any]
                 ) -> dict[str, Any]:
    """``ember-xla batch --actions=rewrite,emulate``: emulate the model (``--target``,
    ``-O``; defaults tmu, -O3; an NPU target places the tables, a multi-core DAE target the
    clusters, with ``--placement=auto``) on random valid inputs, write ``emulate.json`` into
    the model's folder; summary field ``emulated_cycles`` (a multi-core target: the
    makespan)."""
    from ember_xla.machines.config import load_target
    from ember_xla.orchestrate.errors import ModelFailed
    from ember_xla.runtime.inputs import random_inputs
    from ember_xla.util.atomic import write_atomic

    inputs = random_inputs(model.module, 0, model.bound)
    tol = {k: float(options.get(k, d)) for k, d in (("verify_atol", VERIFY_ATOL),
                                                      ("verify_rtol", VERIFY_RTOL))}
    target = load_target(options.get("target") or DEFAULT_TARGET)
    if target.npu is not None:  # a multi-core NPU: the tables placed by the auto mapper
        from ember_xla.orchestrate.place_model import emulate_placed
        from ember_xla.orchestrate.rewrite_model import rewrite_for_placement

        every = rewrite_for_placement(model.module).module
        run = emulate_placed(model.module, every, inputs, target, "auto", **tol)
        write_atomic(os.path.join(out_dir, "emulate.json"),
                     strict_json.dumps(run.as_dict(), indent=1) + "\n")
        if not run.ok:
            raise ModelFailed(f"{model.source}: emulate: the NPU outputs differ "
                              "(see emulate.json)")
        return {"emulated_cycles": run.report.makespan_cycles}
    if target.cores > 1:  # DAE cores: every cluster placed by the auto mapper, one run
        from ember_xla.orchestrate.emulate_cores import emulate_on_cores
        from ember_xla.orchestrate.rewrite_model import rewrite_for_placement
        from ember_xla.placement.dae import report

        every = rewrite_for_placement(model.module).module
        cores = emulate_on_cores(model.module, every, inputs, target, "auto", engine="fast",
                                 **tol)
        d = report.as_dict(target, cores.works, cores.plan, cores.timing)
        d["verify"] = cores.verify
        write_atomic(os.path.join(out_dir, "emulate.json"),
                     strict_json.dumps(d, indent=1) + "\n")
        if not cores.ok:
            raise ModelFailed(f"{model.source}: emulate: the emulated outputs differ "
                              "(see emulate.json)")
        return {"emulated_cycles": cores.makespan}
    level = options.get("opt_level")
    level = DEFAULT_LEVEL if level is None else int(level)
    em = emulate_model(model, options.get("target") or DEFAULT_TARGET, level, inputs, **tol)
    write_atomic(os.path.join(out_dir, "emulate.json"), em.report.to_json() + "\n")
    if not em.ok:
        raise ModelFailed(f"{model.source}: emulate: the emulated outputs differ "
                          "(see emulate.json)")
    return {"emulated_cycles": em.report.total_cycles}
