"""The emulated clusters inside XLA: a copy of the rewritten module in which every emulated
``ember.*`` call becomes an ``ember.emulate`` custom-call (the C++ emulator's typed-FFI target,
``emulator/cc/emulate.cc``) with the same operands and results and, as attributes, the
cluster's DAE program (one-line text), the target (``executor_cc.target_text``) and the cluster's
name. The whole model then runs on XLA:CPU, returning after its outputs each cluster's results
(``capture.capture_module``: what the emulated clusters computed, to verify them
against their native kernels); each ``ember.emulate`` execution logs its timing report, read
back with ``executor_cc.take_reports()``.

The target is registered by its owner, the emulator's library (``cc_library`` provides it to
``ember_xla.ffi``), when a module that mentions ``ember.`` is compiled."""

from __future__ import annotations

from typing import Any

import numpy as np

from ember_xla.custom_calls import ATTRS_KEY, EMULATE  # noqa: F401  (ImportError: no target)
from ember_xla.emulator import executor_cc
from ember_xla.emulator.capture import Captured, NotCapturable, capture_module, split_captured
from ember_xla.ir.graph import Module
from ember_xla.machines.config import Target


def emulated_module(rewritten: Module, clusters: list[Any], target: Target) -> Module:
    """The copy of ``rewritten`` with each of ``clusters`` (``compile.CompiledCluster``)
    replaced by an ``ember.emulate`` call."""
    from ember_xla.call_specs import ember_calls

    m = rewritten.clone()
    by_name = {c.name: c for c in clusters}
    for op in ember_calls(m):
        c = by_name.get(op.name)
        if c is None:
            continue
        op.attributes["custom_call_target"] = EMULATE.name
        op.attributes[ATTRS_KEY] = executor_cc.emulate_attributes(c.program, target, c.name)
    return m


def run_emulated(rewritten: Module, clusters: list[Any], inputs: list[np.ndarray],
                 target: Target) -> tuple[Captured, dict[str, Any]]:
    """One run on XLA:CPU of the model with ``clusters`` emulated: (its outputs and every
    cluster's results as that run computed them (``capture.Captured`` without operands; no
    results when a call is inside a nested computation), per emulated cluster name its
    TimingReport)."""
    from ember_xla.runtime.execute import compile_module

    try:
        capturing, n_own, layout = capture_module(rewritten, operands=False)
    except NotCapturable:  # a call inside a nested computation: the model's outputs only
        capturing, n_own, layout = rewritten, -1, []
    exe = compile_module(emulated_module(capturing, clusters, target))
    executor_cc.take_reports()                       # drop reports of earlier runs
    flat = exe.run(inputs)
    reports = dict(executor_cc.take_reports())
    missing = [c.name for c in clusters if c.name not in reports]
    if missing:
        raise RuntimeError(f"ember.emulate logged no report for cluster %{missing[0]}")
    return split_captured(flat, len(flat) if n_own < 0 else n_own, layout), reports
