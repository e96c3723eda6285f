"""``ember-xla emulate MODEL [--target=tmu|FILE.toml] [-O0..-O4] [--trace t.json] [--json]``:
rewrite the model's embedding clusters, lower each to a DAE program at the level, run the
whole model on XLA:CPU with the clusters on the emulated DAE machine, verify the outputs
against the original module and print the per-cluster timing report (a text table, or JSON
with ``total_cycles`` and one entry per cluster). Progress and verification go to stderr, the
report to stdout.

Exit codes: 0 verified; 1 the outputs differ (original vs emulated beyond ``--verify_atol +
--verify_rtol x |original|``, the rule of ``rewrite --verify`` and ``batch``, or
an emulated cluster vs its native kernel in any bit): the lines name the output and the index
that differs most, and nothing is written (no report, trace, plot or plan); 2 bad input: a bad
target file, a program that does not fit the target, a cluster the lowering refuses (unless
``--native_fallback``: it then runs on the native kernel and the report lists it), each as one
line naming what and why."""

from __future__ import annotations

import sys
from typing import Any

from absl import flags

import ember_xla.cli.target_flag  # noqa: F401  (--target)
from ember_xla.orchestrate.emulate_model import DEFAULT_LEVEL, DEFAULT_TARGET, emulate_model
from ember_xla.orchestrate.errors import UsageError
from ember_xla.util import strict_json

flags.DEFINE_string("trace", None, "emulate: write a Chrome/Perfetto trace (JSON for "
                    "ui.perfetto.dev) of the emulated clusters to this file.")
flags.DEFINE_bool("native_fallback", False, "emulate: run a cluster the DAE lowering refuses "
                  "on the native kernel (listed in the report) instead of failing.")
flags.DEFINE_enum("engine", "auto", ["auto", "fast", "xla", "python"],
                  "emulate: fast (the default when built: each cluster's outputs from its "
                  "native kernel, its timing from the C++ executor's addresses mode, the same "
                  "report), xla (the full functional C++ emulator as an XLA custom-call, its "
                  "outputs checked against the native kernels) or python (the reference "
                  "emulator beside the native kernels). On a multi-core DAE target: fast or "
                  "xla (the full executor for every piece).")



def _level(flags_: Any) -> int:
    if getattr(flags_, "pipeline", None) is not None:
        raise UsageError("emulate takes an optimization level -O0..-O4, not --pipeline")
    from ember_xla.dae_target.passes.levels import UnknownLevel, parse_level

    try:
        return parse_level(DEFAULT_LEVEL if flags_.opt_level is None else flags_.opt_level)
    except UnknownLevel as e:
        raise UsageError(str(e)) from None


def _model_line(m: dict[str, Any], label: str) -> str:
    """The model-level verification line (``runtime.compare``'s rule and wording)."""
    from ember_xla.runtime.compare import mismatch_line

    how = "bit for bit" if m["bitwise_equal"] else f"max |diff| {m['max_abs_diff']:.3g}"
    line = f"verify: original vs {label} model on XLA:CPU: {how}"
    return line if m["ok"] else f"{line}: MISMATCH: {mismatch_line(m, m['atol'])}"


def _say_verify(em: Any, say: Any) -> None:
    from ember_xla.runtime.compare import mismatch_line

    v = em.report.verify
    say(_model_line(v["model"], "emulated"))
    for c in v["clusters_vs_native"]:
        if not c.get("cpp_cycles_equal", True):
            say(f"verify: cluster {c['index']} (%{c['custom_call']}): the C++ emulator's cycles "
                "differ from the Python reference's: MISMATCH")
        if not c["bitwise_equal"]:
            say(f"verify: cluster {c['index']} (%{c['custom_call']}): MISMATCH: emulated "
                + mismatch_line(c, None, "the native kernel's"))
    for c in v.get("clusters_outputs_native", []):
        if not c.get("cpp_cycles_equal", True):
            say(f"verify: cluster {c['index']} (%{c['custom_call']}): the C++ emulator's cycles "
                "differ from the Python reference's: MISMATCH")
    if v.get("clusters_outputs_native"):
        say(f"verify: {len(v['clusters_outputs_native'])} cluster(s) timed from their "
            "addresses: their outputs are the native kernels' (--engine=xla computes and "
            "checks the emulated values)")
    if v["clusters_vs_native"] and all(c["bitwise_equal"] for c in v["clusters_vs_native"]):
        say(f"verify: {len(v['clusters_vs_native'])} emulated cluster(s) equal the native "
            "kernels bit for bit on the model's values")
    if v.get("clusters_unchecked"):
        say(f"verify: {len(v['clusters_unchecked'])} cluster(s) inside nested computations "
            "checked through the model's outputs only: "
            + ", ".join(f"%{n}" for n in v["clusters_unchecked"]))


def emulate_main(args: list[str], flags_: Any) -> int:
    from ember_xla.cli.model_arg import load_arg
    from ember_xla.cli.run_cmd import load_inputs
    from ember_xla.machines.config import load_target

    if len(args) != 1:
        raise UsageError("emulate takes exactly one MODEL argument")
    target_name = flags_.target or DEFAULT_TARGET
    target = load_target(target_name)  # a bad target fails before the model is loaded
    on_cores = target.npu is None and target.cores > 1
    placed = target.npu is not None or flags_["placement"].present
    if placed and target.npu is None and not on_cores:
        raise UsageError(f"--placement: {target.name} ({target.source}) has one core: "
                         "placement needs a multi-core target (--target=tmu8 for DAE cores, "
                         "--target=npu for the NPU)")
    if on_cores:
        for name in ("opt_level", "pipeline", "preload"):
            if flags_[name].present:
                raise UsageError(f"--{name}: on the cores of a DAE target the program variant "
                                 "of each piece is chosen by --placement (the C++ emulator "
                                 "runs them)")
        if flags_.engine == "python":
            raise UsageError("--engine=python: on the cores of a DAE target the C++ emulator "
                             "runs the pieces (--engine=fast or xla)")
    elif placed:
        from ember_xla.machines.npu import machine_of

        machine_of(target)  # --placement on a target without [dma]: one line, exit 2
    else:
        for name in ("plot", "save_plan", "preload"):
            if flags_[name].present:
                raise UsageError(f"--{name}: only with a multi-core target (--target=tmu8 "
                                 "or --target=npu, --placement=...)")
    level = None if placed else _level(flags_)
    model = load_arg(args[0], flags_, one=True)[0]
    inputs = load_inputs(model, flags_.inputs, flags_.seed)

    def say(msg: str) -> None:
        print(msg, file=sys.stderr)

    if on_cores:
        return _emulate_on_cores(model, target, inputs, flags_, say)
    if placed:
        return _emulate_placed(model, target, inputs, flags_, say)

    em = emulate_model(model, target_name, level, inputs, engine=flags_.engine,
                       native_fallback=flags_.native_fallback, trace=flags_.trace,
                       group=flags_.group_tables, verify_atol=flags_.verify_atol,
                       verify_rtol=flags_.verify_rtol, say=say)
    _say_verify(em, say)
    if not em.ok:
        say("emulate: verification FAILED: nothing written")
        return 1
    if flags_.trace:
        say(f"trace: {em.report.trace_events} events written to {flags_.trace} "
            "(open in ui.perfetto.dev)")
    print(em.report.to_json() if flags_.json else em.report.table())
    return 0


def _say_placed_verify(say: Any, verify: dict[str, Any], label: str, what: str, key: str
                       ) -> None:
    """The verification lines of a placed run: the model, then the clusters' outputs."""
    from ember_xla.runtime.compare import mismatch_line

    say(_model_line(verify["model"], label))
    bad = [c["custom_call"] for c in verify["clusters_vs_native"] if not c[key]]
    for c in verify["clusters_vs_native"]:
        if not c[key] and "worst" in c:
            say(f"verify: cluster %{c['custom_call']}: MISMATCH: "
                + mismatch_line(c, None, "the native kernel's"))
    say(f"verify: {what} " + ("equal the native kernels bit for bit" if not bad
                              else f"differ from the native kernel: {', '.join(bad)}: MISMATCH"))


def _emulate_on_cores(model: Any, target: Any, inputs: Any, flags_: Any, say: Any) -> int:
    """A multi-core DAE target: the clusters placed on its cores (``--placement``), emulated
    together, verified; per-core and per-piece report (docs/PLACEMENT.md, "DAE cores")."""
    from ember_xla.orchestrate.emulate_cores import emulate_on_cores
    from ember_xla.orchestrate.rewrite_model import rewrite_for_placement
    from ember_xla.placement.dae import report

    result = rewrite_for_placement(model.module)
    run = emulate_on_cores(model.module, result.module, inputs, target, flags_.placement,
                           native_fallback=flags_.native_fallback, baselines=bool(flags_.plot),
                           verify_atol=flags_.verify_atol, verify_rtol=flags_.verify_rtol,
                           engine="full" if flags_.engine == "xla" else "fast")
    say(f"{model.source}: {len(result.clusters)} embedding cluster(s) rewritten, "
        f"{len(run.works)} placed on the {run.plan.cores} core(s) of {target.name} "
        f"({target.source}) by --placement={flags_.placement}")
    for name, why in run.fallback:
        say(f"cluster %{name}: on the native kernel (not on the DAE cores): {why}")
    native = run.verify.get("clusters_outputs_native", [])
    if run.verify["clusters_vs_native"] or not native:
        _say_placed_verify(say, run.verify, "emulated",
                           f"the pieces of {len(run.verify['clusters_vs_native'])} cluster(s)",
                           "bitwise_equal")
    else:
        say(_model_line(run.verify["model"], "emulated"))
    if native:
        say(f"verify: {len(native)} cluster(s) timed from their addresses: their outputs are "
            "the native kernels' (--engine=xla computes and checks the emulated values)")
    if not run.ok:
        say("emulate: verification FAILED: nothing written")
        return 1
    if flags_.save_plan:
        from ember_xla.util.atomic import write_atomic

        write_atomic(flags_.save_plan, strict_json.dumps(run.plan.as_dict(), indent=1) + "\n")
        say(f"plan: {flags_.save_plan}")
    if flags_.trace:
        n = report.write_trace(flags_.trace, target, run.works, run.plan, run.timing)
        say(f"trace: {n} events written to {flags_.trace} (one track group per core; open in "
            "ui.perfetto.dev)")
    if flags_.plot:
        report.plot_cores([(run.plan, run.timing), *run.baselines], flags_.plot,
                          f"{model.source}: {len(run.plan.pieces)} pieces on "
                          f"{run.plan.cores} cores")
        say(f"per-core load: {flags_.plot}")
    d = report.as_dict(target, run.works, run.plan, run.timing)
    d["total_cycles"] = d["makespan_cycles"]
    d["native_fallback"] = [{"cluster": n, "reason": w} for n, w in run.fallback]
    d["verify"] = run.verify
    d["baselines"] = [{"policy": p.policy, "makespan_cycles": tm.makespan}
                      for p, tm in run.baselines]
    print(strict_json.dumps(d, indent=1) if flags_.json
          else report.table(target, run.works, run.plan, run.timing))
    return 0


def _emulate_placed(model: Any, target: Any, inputs: Any, flags_: Any, say: Any) -> int:
    """The NPU path: place the clusters' tables on the cores (``--placement``), emulate the
    plan, verify, print the plan and per-core times (docs/PLACEMENT.md)."""

    from ember_xla.orchestrate.place_model import emulate_placed
    from ember_xla.orchestrate.rewrite_model import rewrite_for_placement

    if flags_.trace:
        raise UsageError("--trace: the NPU emulator writes no Perfetto trace (a DAE target "
                         "such as tmu does)")
    if flags_["opt_level"].present or flags_["pipeline"].present:
        raise UsageError("-O/--pipeline: the NPU strategies are chosen per table by "
                         "--placement, not by an optimization level")
    result = rewrite_for_placement(model.module)
    run = emulate_placed(model.module, result.module, inputs, target, flags_.placement,
                         preload=flags_.preload, native_fallback=flags_.native_fallback,
                         baselines=bool(flags_.plot), verify_atol=flags_.verify_atol,
                         verify_rtol=flags_.verify_rtol)
    say(f"{model.source}: {len(result.clusters)} embedding cluster(s) rewritten, "
        f"{sum(len(c.tables) for c in run.clusters)} table(s) placed on {target.name} "
        f"({target.source}) by --placement={flags_.placement}")
    _say_placed_verify(say, run.verify, "rewritten", f"NPU outputs of {len(run.clusters)} "
                       "cluster(s)", "equal")
    if not run.ok:
        say("emulate: verification FAILED: nothing written")
        return 1
    if flags_.save_plan:
        run.plan.save(flags_.save_plan)
        say(f"plan: {flags_.save_plan}")
    if flags_.plot:
        from ember_xla.placement.plot import plot_loads

        plot_loads([*run.baselines, run.report], flags_.plot,
                   f"{model.source}: {len(run.plan.pieces)} pieces on {run.plan.cores} cores")
        say(f"per-core load: {flags_.plot}")
    print(strict_json.dumps(run.as_dict(), indent=1) if flags_.json else run.table())
    return 0
