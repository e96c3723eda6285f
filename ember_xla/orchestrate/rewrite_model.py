"""Rewrite a model for a machine (``rewrite_for``: the CPU's native kernels or a DAE machine,
the options chosen in one place), and what ``ember-xla rewrite`` and ``batch`` write: embedding
clusters -> ember custom-calls in ``rewritten.pb``, ``rewritten.hlo`` and ``report.json``, plus
``params.npz`` with the values of the parameters the importer bound (a SavedModel's variables;
``hlo_import.bound_params``), one subfolder per signature of a SavedModel with several. Every
output is produced in memory first (a module the printer or the proto writer refuses is an
error before anything is written), then the folder is replaced as a whole
(``util.atomic.write_folder_atomic``)."""

from __future__ import annotations

import os
from typing import Any

from ember_xla.hlo.printer import print_module
from ember_xla.hlo_import.bound_params import PARAMS_FILE, params_npz
from ember_xla.hlo_import.model import Model
from ember_xla.hlo_import.output_names import OUTPUTS_FILE, outputs_json
from ember_xla.hlo_import.proto import module_to_proto
from ember_xla.ir.graph import Module
from ember_xla.orchestrate.errors import ModelFailed, UsageError
from ember_xla.rewrites.patterns.padded_bag import IN_CONTEXT_ORDER
from ember_xla.rewrites.pipeline import RewriteResult, rewrite_module
from ember_xla.runtime.compare import VERIFY_ATOL, VERIFY_RTOL
from ember_xla.util import strict_json
from ember_xla.util.atomic import (
    check_removable,
    check_writable,
    resolve_output,
    write_folder_atomic,
)

OUTPUTS = ("rewritten.pb", "rewritten.hlo", "report.json", PARAMS_FILE, OUTPUTS_FILE)


#: The rewrite a DAE machine is given: every cluster (the machine is the target, never the
#: CPU's cost model), one call per reduction (the DAE lowering has no multi-output form) and
#: grouped calls that return their tables' tuple (the lowering has no concatenating form).
DAE_OPTIONS = {"cost_model": False, "multi_output": False, "group_concat": False,
               "xla_order": False}


_MACHINE_DEFAULT: Any = object()


def rewrite_for(module: Module, machine: str, *, group: bool = True,
                cost_model: bool | None = _MACHINE_DEFAULT, assume_finite_tables: bool = False
                ) -> RewriteResult:
    """The one place the rewrite options are chosen per machine: ``"cpu"`` (the native
    kernels: multi-output calls, table-batched calls unless ``group`` is False, the measured
    cost model deciding per call unless ``cost_model`` says otherwise; ``None``:
    ``EMBER_XLA_COST_MODEL`` decides) or ``"dae"`` (``DAE_OPTIONS``: every cluster, whatever
    the CPU's cost model would say, padded bags in the programs' own order of additions
    (``xla_order=False``: ``DAE_PATTERNS``); ``cost_model`` may only be False there)."""
    if machine not in ("cpu", "dae"):
        raise ValueError(f"rewrite_for: unknown machine {machine!r} (cpu or dae)")
    options: dict[str, Any] = dict(DAE_OPTIONS) if machine == "dae" else {"cost_model": None}
    if cost_model is not _MACHINE_DEFAULT:
        if machine == "dae" and cost_model is not False:
            raise ValueError("rewrite_for: a DAE machine never uses the CPU's cost model")
        options["cost_model"] = cost_model
    return rewrite_module(module, group=group, assume_finite_tables=assume_finite_tables,
                          **options)


def rewrite_for_placement(module: Module) -> RewriteResult:
    """The DAE rewrite for a placement run (multi-core DAE targets, the NPU): every table its
    own call, whatever ``--group_tables`` says, since the mapper spreads the tables over the
    cores (a grouped call on DAE cores can only be cut by batch, all its tables together; on
    the NPU it is placed whole)."""
    return rewrite_for(module, "dae", group=False)


def check_out_dir(out_dir: str) -> None:
    """``out_dir`` is replaced as a whole: it must be new, empty, or hold only our outputs,
    and lie where a folder can be made."""
    check_writable(out_dir)  # also refuses a file
    if not os.path.exists(out_dir):
        return
    for name in sorted(os.listdir(out_dir)):
        sub = os.path.join(out_dir, name)
        ours = name in OUTPUTS or (os.path.isdir(sub) and not os.path.islink(sub) and all(
            f in OUTPUTS for f in os.listdir(sub)))
        if not ours:
            raise UsageError(f"--out {out_dir}: holds {name!r}, which rewrite did not write; "
                             "the folder is replaced as a whole, so give a new or empty folder")
    check_removable(out_dir)


def rewrite_one(model: Model, out_dir: str, verify: bool, seed: int,
                say: Any = print, group: bool = True, cost_model: bool | None = None,
                assume_finite_tables: bool = False, verify_atol: float = VERIFY_ATOL,
                verify_rtol: float = VERIFY_RTOL) -> tuple[dict[str, Any], Module]:
    """Rewrite one model and write its outputs into ``out_dir``; (the report, the rewritten
    module)."""
    out_dir = resolve_output(out_dir)
    check_out_dir(out_dir)
    report, files, result = prepare(model, verify, seed, say, group, cost_model,
                                    assume_finite_tables, verify_atol, verify_rtol)
    say(f"[3/3] writing {out_dir}")
    write_folder_atomic(out_dir, files)
    return report, result.module


def rewrite_all(models: list[Model], out_dir: str, verify: bool, seed: int,
                group: bool = True, cost_model: bool | None = None,
                assume_finite_tables: bool = False, verify_atol: float = VERIFY_ATOL,
                verify_rtol: float = VERIFY_RTOL) -> None:
    """Rewrite every model, then write all outputs as one atomic folder replacement."""
    out_dir = resolve_output(out_dir)
    check_out_dir(out_dir)
    files: dict[str, bytes | str] = {}
    for m in models:
        sub = m.source.rsplit("[", 1)[-1].rstrip("]") if len(models) > 1 else ""
        if sub and (sub in ("", ".", "..") or "/" in sub or sub in OUTPUTS):
            raise UsageError(f"{m.source}: signature name {sub!r} cannot name an output folder")
        _, out, _ = prepare(m, verify, seed, print, group, cost_model, assume_finite_tables,
                            verify_atol, verify_rtol)
        files.update({os.path.join(sub, k) if sub else k: v for k, v in out.items()})
    print(f"[3/3] writing {out_dir}")
    write_folder_atomic(out_dir, files)


def _check_canonical(model: Model, assume_finite_tables: bool,
                     input_sets: dict[str, list[Any]]) -> dict[str, Any]:
    """``runtime.canonical_check`` on the probe of the canonicalization the CPU rewrite runs."""
    from ember_xla.rewrites.canonicalize.probe import canonical_probe
    from ember_xla.runtime.canonical_check import check_replacements

    return check_replacements(canonical_probe(model.module, assume_finite_tables,
                                              xla_order=True), input_sets)


def prepare(model: Model, verify: bool, seed: int, say: Any = print,
            group: bool = True, cost_model: bool | None = None,
            assume_finite_tables: bool = False, verify_atol: float = VERIFY_ATOL,
            verify_rtol: float = VERIFY_RTOL
            ) -> tuple[dict[str, Any], dict[str, bytes | str], RewriteResult]:
    """The report, the output files and the rewrite of one model, all in memory. With
    ``verify``, a rewritten module whose outputs differ from the original's beyond
    ``verify_atol + verify_rtol * |original|`` (``runtime.compare.within_tolerance``), or
    with a custom-call whose values differ from XLA's for its cluster on the model's own
    operands (``runtime.cluster_check``: same values, bit for bit but for NaN payloads and
    zero signs), or, when a cluster is rewritten, with a value the canonicalization replaced
    that its canonical form does not reproduce in the model (``runtime.canonical_check``, the
    same rule), raises ``ModelFailed`` before anything is written."""
    say(f"[1/3] finding embedding clusters in {model.source} "
        f"({sum(len(g.ops) for g in model.module.graphs)} instructions)")
    result = rewrite_for(model.module, "cpu", group=group, cost_model=cost_model,
                         assume_finite_tables=assume_finite_tables)
    for c in result.clusters:
        t = c["table"]
        update = f"optimizer {c['optimizer']}" if c.get("optimizer") else "its update in XLA"
        what = (c["attributes"].get("combiner", "segment sum of computed rows,")
                if c["pass"] == "forward" else f"gradient, {update},")
        say(f"  cluster {c['custom_call']}: {c['kind']} {what} over "
            f"table {t['instruction']} [{t['rows']}x{t['dim']} {t['dtype']}] -> {c['output']}")
    for grp in result.groups:
        what = ("reductions of one lookup" if grp.get("multi_output")
                else "tables batched")
        p = grp.get("predicted_us")
        why = (f" (predicted {p['grouped']} us vs {p['separate_calls']} us as separate calls, "
               f"{p['xla']} us in XLA)" if p else "")
        say(f"  {grp['custom_call']}: {len(grp['members'])} {what} into one call{why}")
    for n in result.near_misses:
        fused = n.get("fused_predicted_us")
        also = (f"; fused with its update: predicted {fused['ember']} us vs XLA {fused['xla']} us"
                if fused else "")
        say(f"  near-miss at {n['location']['instruction']}: {n['reason']}{also}")
    report = {"source": model.source, **result.report()}
    if model.source_names or model.bound:
        report["parameters"] = parameter_entries(model)
        by_name = {e["name"]: e["source_name"] for e in report["parameters"]
                   if "source_name" in e}
        for c in report.get("clusters", []):
            src = by_name.get(c.get("table", {}).get("instruction"))
            if src is not None:
                c["table"]["source_name"] = src
    if model.notices:
        report["notices"] = list(model.notices)
    if verify:
        from ember_xla.runtime.cluster_check import check_clusters, cluster_mismatch_line
        from ember_xla.runtime.compare import (
            equal_values_note,
            mismatch_line,
            verify_rewrite,
            within_tolerance,
        )
        from ember_xla.runtime.inputs import edge_id_inputs, random_inputs

        inputs = random_inputs(model.module, seed, model.bound)
        cases = edge_id_inputs(model.module, inputs, seed)
        say("[2/3] verifying: original vs rewritten on XLA:CPU, random valid inputs"
            + (" (ids in range, then negative, out-of-range and duplicate ids)" if cases else
               " (one input set: no entry parameter is the ids of a gather or scatter, so no "
               "edge-case ids)"))
        report["verify"] = {"seed": seed, "edge_case_ids": bool(cases),
                            **verify_rewrite(model.module, result.module, inputs, cases,
                                             verify_atol, verify_rtol)}
        v = report["verify"]
        say(f"  outputs bitwise equal: {v['bitwise_equal']}, max abs difference "
            f"{v['max_abs_diff']:.3g}" + (f" over {len(cases) + 1} input sets" if cases else "")
            + equal_values_note(v))
        if not within_tolerance(v):
            why = f"; {v['diagnosis']}" if v.get("diagnosis") else ""
            raise ModelFailed(f"{model.source}: verify: {mismatch_line(v, verify_atol)}{why}; "
                              "nothing written")
        in_context = frozenset(c["custom_call"] for c in result.clusters
                               if IN_CONTEXT_ORDER in c["notes"] and c["custom_call"])
        if in_context and not v["bitwise_equal"]:
            raise ModelFailed(f"{model.source}: verify: the outputs are not bit for bit "
                              f"XLA:CPU's ({mismatch_line(v, verify_atol)}), and "
                              f"{', '.join(sorted(in_context))} follow the model's own order, "
                              "which only they check; nothing written")
        v["clusters"] = check_clusters(result.module, {"in_range": inputs, **cases},
                                       in_context)
        calls = v["clusters"]["calls"]
        unchecked = v["clusters"]["unchecked"]
        if not v["clusters"]["exact"]:
            raise ModelFailed(f"{model.source}: verify: {cluster_mismatch_line(v['clusters'])}"
                              "; nothing written")
        if calls or unchecked or in_context:
            say(f"  each ember call equals XLA:CPU on its cluster's operands in the model "
                f"({len(calls)} checked" + (f", {len(unchecked)} inside loops not checked"
                                            if unchecked else "")
                + (f", {len(in_context)} in the model's own order checked by its outputs"
                   if in_context else "") + ")")
        if result.module is not model.module:  # the output is the canonical form
            canon = v["canonical"] = _check_canonical(model, assume_finite_tables,
                                                      {"in_range": inputs, **cases})
            if not canon["exact"]:
                from ember_xla.runtime.canonical_check import replacement_mismatch_line

                raise ModelFailed(f"{model.source}: verify: "
                                  f"{replacement_mismatch_line(canon)}; nothing written")
            if canon["checked"] or canon["unchecked"]:
                say(f"  each value the canonicalization replaced equals its canonical form on "
                    f"XLA:CPU in the model ({canon['checked']} checked"
                    + (f", {len(canon['unchecked'])} inside called computations not checked"
                       if canon["unchecked"] else "") + ")")
    else:
        say("[2/3] verification skipped (pass --verify)")
    try:
        files: dict[str, bytes | str] = {
            "rewritten.pb": module_to_proto(result.module),
            "rewritten.hlo": print_module(result.module),
            "report.json": strict_json.dumps(report, indent=2) + "\n",
        }
        if model.bound:
            files[PARAMS_FILE] = params_npz(result.module, model.bound)
        if model.output_names:
            files[OUTPUTS_FILE] = outputs_json(model.output_names)
    except ValueError as e:  # e.g. a layout field the text printer cannot spell
        raise UsageError(f"{model.source}: cannot write the rewritten module: {e}") from None
    say(f"  {len(result.clusters)} clusters rewritten, {len(result.near_misses)} near-misses")
    return report, files, result


def parameter_entries(model: Model) -> list[dict[str, Any]]:
    """Per entry parameter: number, name, shape, the name it has in the source framework and
    whether its value is bound (travels in ``params.npz``)."""
    params = sorted(model.module.entry.params(),
                    key=lambda p: p.attributes.get("parameter_number", 0))
    out = []
    for p in params:
        num = p.attributes.get("parameter_number", 0)
        entry: dict[str, Any] = {"number": num, "name": p.name, "shape": str(p.result.type)}
        if num in model.source_names:
            entry["source_name"] = model.source_names[num]
        entry["bound"] = num in model.bound
        out.append(entry)
    return out
