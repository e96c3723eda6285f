"""``ember-xla rewrite MODEL --out DIR [--verify]``: rewrite embedding clusters into ember
custom-calls; write ``rewritten.pb``, ``rewritten.hlo`` and ``report.json`` atomically."""

from __future__ import annotations

import json
import os
from typing import Any

from ember_xla.hlo_import.model import Model
from ember_xla.hlo_import.proto import module_to_proto
from ember_xla.ir.hlo.printer import print_module
from ember_xla.rewrites.pipeline import RewriteResult, rewrite_module
from ember_xla.util.atomic import write_atomic


def rewrite_one(model: Model, out_dir: str, verify: bool, seed: int,
                say: Any = print, group: bool = False,
                cost_model: bool | None = None,
                assume_finite_tables: bool = False) -> dict[str, Any]:
    say(f"[1/3] finding embedding clusters in {model.source} "
        f"({sum(len(g.ops) for g in model.module.graphs)} instructions)")
    result: RewriteResult = rewrite_module(model.module, group=group, cost_model=cost_model,
                                           assume_finite_tables=assume_finite_tables)
    for c in result.clusters:
        t = c["table"]
        say(f"  cluster {c['custom_call']}: {c['kind']} {c['attributes']['combiner']} over "
            f"table {t['instruction']} [{t['rows']}x{t['dim']} {t['dtype']}] -> {c['output']}")
    for grp in result.groups:
        say(f"  {grp['custom_call']}: {len(grp['members'])} tables batched into one call")
    for n in result.near_misses:
        say(f"  near-miss at {n['location']['instruction']}: {n['reason']}")
    report = {"source": model.source, **result.report()}
    if verify:
        from ember_xla.runtime.compare import verify_rewrite
        from ember_xla.runtime.inputs import random_inputs

        say("[2/3] verifying: original vs rewritten on XLA:CPU, random valid inputs")
        inputs = random_inputs(model.module, seed, model.bound)
        report["verify"] = {"seed": seed, **verify_rewrite(model.module, result.module, inputs)}
        v = report["verify"]
        say(f"  outputs bitwise equal: {v['bitwise_equal']}, max abs difference "
            f"{v['max_abs_diff']:.3g}")
    else:
        say("[2/3] verification skipped (pass --verify)")
    say(f"[3/3] writing {out_dir}")
    os.makedirs(out_dir, exist_ok=True)
    write_atomic(os.path.join(out_dir, "rewritten.pb"), module_to_proto(result.module))
    write_atomic(os.path.join(out_dir, "rewritten.hlo"), print_module(result.module))
    write_atomic(os.path.join(out_dir, "report.json"), json.dumps(report, indent=2) + "\n")
    say(f"  {len(result.clusters)} clusters rewritten, {len(result.near_misses)} near-misses")
    return report
