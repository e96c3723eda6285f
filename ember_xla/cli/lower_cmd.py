"""``ember-xla lower MODEL [-O0..-O4 | --pipeline=P] [--cluster N] [--print-after-all]
[--verify] [--out DIR]``: rewrite the model's embedding clusters into ember custom-calls, lower
each call to SLC and run the pass pipeline to SLCV and DLC (docs/IR.md), printing every level
like ``mlir-opt`` does (the IR on stdout, progress and results on stderr) or writing it to DIR.

- Levels printed: the module right after lowering (SLC) and the last module of each further
  level the pipeline reaches (SLCV, DLC); ``--print-after-all`` prints after every pass.
- ``--verify``: each printed module is run by its level's interpreter on random valid inputs
  and edge cases and compared with the cluster's outlined computation on XLA:CPU
  (``dae_target/check.py``); the max difference per level is reported; exit 1 on a mismatch.
- ``--out DIR``: ``DIR/cluster<k>.<level>.mlir`` (``cluster<k>.<nn>.<pass>.mlir`` with
  ``--print-after-all``) and ``DIR/lower.json``, all written atomically after everything
  succeeded.
- ``--emit=program``: print each cluster's DAE program (docs/DAE_PROGRAM.md) instead of the
  IR; with ``--out``, ``DIR/cluster<k>.dae`` holds its text form. The pipeline must end in DLC.
- A cluster the lowering does not support is reported with the reason, never lowered wrong.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from typing import Any

from ember_xla.cli.opt_cmd import load_dae_registry, parse_passes, run_passes, verify_ir
from ember_xla.ir.graph import Module
from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import ModulePass, pipeline_string
from ember_xla.ir.printer import print_module
from ember_xla.orchestrate.errors import UsageError
from ember_xla.util import strict_json
from ember_xla.util.atomic import write_atomic

DEFAULT_LEVEL = 3
LEVEL_ORDER = ("SLC", "SLCV", "DLC")


@dataclasses.dataclass
class Stage:
    label: str                 # "lower-to-slc" or the pass with its options
    level: str                 # SLC | SLCV | DLC
    text: str
    module: Module             # a snapshot (for --verify)
    report: str = ""           # what the pass said it changed


def level_of(module: Module) -> str:
    """The IR level of a module: the highest Ember dialect it uses."""
    prefixes = {op.opcode.partition(".")[0] for op in module.walk()}
    return "DLC" if "dlc" in prefixes else "SLCV" if "slcv" in prefixes else "SLC"


def resolve_pipeline(flags: Any) -> tuple[str, list[ModulePass]]:
    """The pipeline string and passes chosen by ``-O<n>`` / ``--pipeline`` (default -O3)."""
    from ember_xla.cli.opt_cmd import level_pipeline

    if flags.pipeline is not None and flags.opt_level is not None:
        raise UsageError("give either -O<n> or --pipeline, not both")
    if flags.pipeline is not None:
        text = flags.pipeline
    else:
        text = level_pipeline(DEFAULT_LEVEL if flags.opt_level is None else flags.opt_level)
    passes = parse_passes(text)
    return pipeline_string(passes), passes


def lower_stages(spec: Any, passes: list[ModulePass], where: str) -> list[Stage]:
    """Lower one cluster (a ``ClusterSpec``) and run ``passes``; a snapshot after each step."""
    from ember_xla.dae_target.lower.to_slc import lower_to_slc

    module = lower_to_slc(spec)
    verify_ir(module, f"{where}after lower-to-slc")
    stages = [Stage("lower-to-slc", level_of(module), print_module(module), module.clone())]

    def after(p: ModulePass, m: Module, report: Any) -> None:
        stages.append(Stage(pipeline_string([p]), level_of(m), print_module(m), m.clone(),
                            str(report) if report is not None else ""))

    run_passes(module, passes, after, where=where)
    return stages


def shown_stages(stages: list[Stage], every_pass: bool) -> list[Stage]:
    """Every stage, or the first one and the last stage of each level reached."""
    if every_pass:
        return stages
    last: dict[str, Stage] = {}
    for s in stages:
        last[s.level] = s
    out = [stages[0]]
    for lv in LEVEL_ORDER:
        if lv in last and last[lv] is not stages[0]:
            out.append(last[lv])
    return out


def describe(call: Operation, spec: Any) -> str:
    from ember_xla.call_specs import BACKWARD_ROLES

    if spec.kind in BACKWARD_ROLES:
        p = spec.parts[0]
        return (f"{call.attributes['custom_call_target']} %{call.name} (gradient: rows of "
                f"{p.table}{' gathered by source_rows' if p.layout else ''} added into "
                f"{p.out} at {p.lookups} ids)")
    tables = ", ".join(str(p.table) for p in spec.parts)
    return (f"{call.attributes['custom_call_target']} %{call.name} ({spec.combiner}, "
            f"{spec.index_mode}{', weighted' if spec.weighted else ''}; table {tables})")


def lower_model(model: Any, flags: Any, say: Any, out: Any) -> tuple[dict[str, Any],
                                                                     dict[str, str], bool]:
    """Lower (and check) the clusters of one model; returns (report, files, all_ok)."""
    from ember_xla.call_specs import LoweringRefused, cluster_spec, ember_calls
    from ember_xla.orchestrate.rewrite_model import rewrite_for

    text, passes = resolve_pipeline(flags)
    # the DAE machine is the target: never the CPU's cost model (as emulate and place)
    result = rewrite_for(model.module, "dae", group=flags.group_tables)
    calls = ember_calls(result.module)
    say(f"{model.source}: {len(calls)} ember cluster(s); pipeline: {text or '(none)'}")
    chosen = list(enumerate(calls))
    if flags.cluster is not None:
        if not 0 <= flags.cluster < len(calls):
            have = f"0..{len(calls) - 1}" if calls else "none"
            raise UsageError(f"--cluster {flags.cluster}: {model.source} has {len(calls)} "
                             f"ember clusters (indices {have})")
        chosen = [chosen[flags.cluster]]
    report: dict[str, Any] = {"source": model.source, "pipeline": text, "clusters": []}
    files: dict[str, str] = {}
    ok = True
    for k, call in chosen:
        entry: dict[str, Any] = {"index": k, "custom_call": call.name,
                                 "target": call.attributes["custom_call_target"]}
        report["clusters"].append(entry)
        try:
            spec = cluster_spec(call)
            entry["description"] = describe(call, spec)
            stages = lower_stages(spec, passes, where=f"cluster {k} (%{call.name}): ")
        except LoweringRefused as e:
            entry["refused"] = str(e)
            say(f"  cluster {k} (%{call.name}): refused: {e}")
            continue
        shown = shown_stages(stages, flags.print_after_all)
        entry["stages"] = [{"after": s.label, "level": s.level, "report": s.report}
                           for s in stages]
        say(f"  cluster {k}: {entry['description']}: "
            + " -> ".join(dict.fromkeys(s.level for s in stages)))
        if flags.verify:
            ok &= _verify(result.module, call, spec, shown, passes, entry, flags, say)
        if getattr(flags, "emit", "ir") == "program":
            _emit_program(k, call, spec, stages[-1], entry, files, say, out)
            continue
        for n, s in enumerate(shown):
            name = (f"cluster{k}.{n:02d}.{s.label.partition('{')[0]}.mlir" if flags.print_after_all
                    else f"cluster{k}.{s.level.lower()}.mlir")
            files[name] = s.text
            if out is not None:
                out.write(f"// ----- cluster {k} (%{call.name}), {s.level} after {s.label} "
                          "-----\n")
                for line in s.report.splitlines():
                    out.write(f"// {line}\n")
                out.write(s.text)
    return report, files, ok


def _emit_program(k: int, call: Operation, spec: Any, last: Stage, entry: dict[str, Any],
                  files: dict[str, str], say: Any, out: Any) -> None:
    """``--emit=program``: the DAE program of the last stage (or the reason it has none)."""
    from ember_xla.dae import ProgramError, print_program, to_text
    from ember_xla.dae_target.program import emit_program

    try:
        if last.level != "DLC":
            raise ProgramError(f"the pipeline ends at {last.level}; a DAE program needs DLC "
                               "(a pipeline ending in decouple, e.g. -O0..-O4)")
        program = emit_program(last.module, [a.shape for a in spec.operands])
    except ProgramError as e:
        entry["program_refused"] = str(e)
        say(f"  cluster {k} (%{call.name}): no DAE program: {e}")
        return
    files[f"cluster{k}.dae"] = to_text(program)
    entry["program"] = f"cluster{k}.dae"
    if out is not None:
        out.write(f"// ----- cluster {k} (%{call.name}), DAE program -----\n")
        out.write(print_program(program))


def elements(spec: Any) -> int:
    """Table elements one run of the cluster reads (lookups x D, summed over its tables; for
    a backward cluster also the [V, D] rows it writes)."""
    from ember_xla.call_specs import BACKWARD_ROLES

    written = math.prod(spec.outputs[0].shape) if spec.kind in BACKWARD_ROLES else 0
    return written + sum(math.prod(p.lookups.shape) * p.table.shape[1] for p in spec.parts)


def _verify(hlo: Module, call: Operation, spec: Any, shown: list[Stage],
            passes: list[ModulePass], entry: dict[str, Any], flags: Any, say: Any) -> bool:
    """Check every shown stage. A cluster reading more than ``--verify_elements`` table
    elements per run is too big for the reference interpreters: the same form at a small size
    (``check.shrink``) is lowered through the same passes and checked against the native
    kernel on XLA:CPU instead (said so in the output and in lower.json)."""
    from ember_xla.dae_target.check import (
        CheckResult,
        check_lowered,
        check_spec,
        shrink,
        summary,
    )
    from ember_xla.ir.interpreter import InterpretError

    size = elements(spec)
    small = None
    if size > flags.verify_elements:
        small = shrink(spec)
        by_label = {s.label: s for s in lower_stages(small, passes, where="shrunk: ")}
        entry["verify_shrunk"] = {"elements": size, "limit": flags.verify_elements,
                                  "operands": [str(a) for a in small.operands]}
        say(f"    verify: {size} table elements per run > --verify_elements="
            f"{flags.verify_elements}: checking the same form at "
            f"{', '.join(str(a) for a in small.operands)} against the native kernel")
    ok = True
    entry["verify"] = []
    for s in shown:
        try:
            if small is None:
                r = check_lowered(hlo, call, s.module, seed=flags.seed)
            else:
                r = check_spec(small, by_label[s.label].module, seed=flags.seed)
        except InterpretError as e:
            r = CheckResult(call.name, entry["target"], "-", failures=[f"interpreter: {e}"])
        entry["verify"].append({"level": s.level, "after": s.label, **summary(r)})
        status = "ok" if r.ok else "MISMATCH: " + "; ".join(r.failures[:3])
        exact = "bit-exact" if r.exact else "within tolerance, kernel bit-exact"
        say(f"    verify {s.level:4s} (after {s.label}): {r.cases} input sets vs "
            f"{r.reference} on XLA:CPU, max |diff| {r.max_abs_diff:.3g} ({exact} expected): "
            f"{status}")
        ok &= r.ok
    return ok


def lower_main(args: list[str], flags: Any) -> int:
    from ember_xla.cli.model_arg import load_arg

    if len(args) != 1:
        raise UsageError("lower takes exactly one MODEL argument")
    load_dae_registry()
    resolve_pipeline(flags)  # a bad pipeline fails before the model is loaded
    models = load_arg(args[0], flags)

    def say(msg: str) -> None:
        print(msg, file=sys.stderr)

    pending: dict[str, str] = {}
    all_ok = True
    for m in models:
        sub = ""
        if len(models) > 1:
            sub = m.source.rsplit("[", 1)[-1].rstrip("]")
        report, files, ok = lower_model(m, flags, say, None if flags.out else sys.stdout)
        all_ok &= ok
        if flags.out:
            folder = os.path.join(flags.out, sub)
            for name, text in files.items():
                pending[os.path.join(folder, name)] = text
            pending[os.path.join(folder, "lower.json")] = strict_json.dumps(report, indent=2) + "\n"
    for path, text in pending.items():
        write_atomic(path, text)
    if flags.out:
        say(f"wrote {len(pending)} files to {flags.out}")
    if not all_ok:
        say("lower: verification FAILED (a level differs from XLA:CPU)")
        return 1
    return 0
