"""The emulated clusters inside XLA: a copy of the rewritten module in which every emulated
``ember.*`` call becomes an ``ember.emulate`` custom-call (the C++ emulator's typed-FFI target,
``emulator/native/emulate.cc``) with the same operands and results and, as attributes, the
cluster's DAE program (one-line text), the target (``fast.target_text``) and the cluster's
name. The whole model then runs on XLA:CPU; each ``ember.emulate`` execution logs its timing
report, read back with ``fast.take_reports()``.

The target is registered with the kernels (``native.register_targets``, when the module
mentions ``ember.``). Importing this module fails (ImportError) when the installed package has
no ``ember.emulate`` target; ``run_model`` then uses the Python reference engine and says so
in the report."""

from __future__ import annotations

from typing import Any

import numpy as np

from ember_xla.custom_calls import ATTRS_KEY, EMULATE  # noqa: F401  (ImportError: no target)
from ember_xla.emulator import fast
from ember_xla.emulator.target import Target
from ember_xla.ir.graph import Module

if not all(hasattr(fast, f) for f in ("emulate_attributes", "take_reports")):
    raise ImportError("the installed emulator has no ember.emulate FFI target")


def emulated_module(rewritten: Module, clusters: list[Any], target: Target) -> Module:
    """The copy of ``rewritten`` with each of ``clusters`` (``compile.CompiledCluster``)
    replaced by an ``ember.emulate`` call."""
    from ember_xla.custom_calls import is_ember_call

    m = rewritten.clone()
    by_name = {c.name: c for c in clusters}
    for g in m.graphs:
        for op in g.ops:
            c = by_name.get(op.name)
            if c is None or not is_ember_call(op):
                continue
            op.attributes["custom_call_target"] = EMULATE.name
            op.attributes[ATTRS_KEY] = fast.emulate_attributes(c.program, target, c.name)
    return m


def run_emulated(rewritten: Module, clusters: list[Any], inputs: list[np.ndarray],
                 target: Target) -> tuple[list[np.ndarray], dict[str, Any]]:
    """(the model's outputs, per cluster name its TimingReport) of one run on XLA:CPU."""
    from ember_xla.runtime.execute import compile_module

    exe = compile_module(emulated_module(rewritten, clusters, target))
    fast.take_reports()                       # drop reports of earlier runs
    outputs = exe.run(inputs)
    reports = dict(fast.take_reports())
    missing = [c.name for c in clusters if c.name not in reports]
    if missing:
        raise RuntimeError(f"ember.emulate logged no report for cluster %{missing[0]}")
    return outputs, reports
