"""Which summation order XLA:CPU uses for a padded bag's ``reduce`` is its own choice, made
per shape while compiling (an f32 reduce it hands to YNNPACK, a long bag axis it splits into a
tree of reduce-windows, loops it vectorizes along the bag axis); the kernel adds the bag's
rows in order. So each rewritten ``ember.padded_bag`` call is measured: its outlined
computation (the original ops) and the call are compiled for XLA:CPU with the options the
module will run with and run on the same random inputs; a call whose bits differ is reported
here, and the rewrite keeps that cluster in XLA."""

from __future__ import annotations

import hashlib

import numpy as np

from ember_xla.custom_calls import PADDED_BAG
from ember_xla.hlo_import.proto import module_to_proto
from ember_xla.ir.graph import Graph, Module
from ember_xla.ir.operation import Operation

_CACHE: dict[str, str | None] = {}


# Module fields that describe the original entry (aliasing of donated parameters, buffer
# donors, shardings, layouts) and would be wrong for a probe's own entry.
_ENTRY_FIELDS = ("input_output_alias", "buffer_donor", "spmd_output_sharding",
                 "spmd_parameters_shardings", "dynamic_parameter_binding",
                 "cross_program_prefetches", "entry_computation_layout")


def _outlined(module: Module, call: Operation) -> Module:
    m = module.clone()
    m.entry = m.graph(call.callees[0].name)
    m.remove_unreachable_graphs()
    for k in _ENTRY_FIELDS:
        m.attributes.pop(k, None)
    return m


def _kernel(reference: Module, call: Operation) -> Module:
    """The call alone: parameters for its operands, the custom-call, its outlined callee."""
    m = reference.clone()
    callee = m.entry
    g = Graph(m.unique_graph_name("probe"))
    params = [g.append(Operation("parameter", [], [v.type], {"parameter_number": i},
                                 name=f"p{i}")).result for i, v in enumerate(call.operands)]
    cc = g.append(Operation("custom-call", params, [call.result.type], dict(call.attributes),
                            [callee], name="probe_call"))
    g.root = cc
    m.add(g, entry=True)
    return m


def order_mismatch(module: Module, call: Operation, excess_precision: bool,
                   seed: int = 0) -> str | None:
    """Why ``call`` (an ``ember.padded_bag`` of ``module``) does not compute its outlined
    computation's bits on XLA:CPU with this ``xla_allow_excess_precision`` (None: it does, on
    two sets of random inputs)."""
    from ember_xla.runtime.execute import run_module
    from ember_xla.runtime.inputs import random_inputs

    reference = _outlined(module, call)
    key = hashlib.sha256(module_to_proto(reference) + repr(excess_precision).encode()
                         ).hexdigest()
    if key in _CACHE:
        return _CACHE[key]
    kernel = _kernel(reference, call)
    options = {"xla_allow_excess_precision": excess_precision}
    why = None
    for s in (seed, seed + 1):
        inputs = random_inputs(reference, s)
        want = run_module(reference, inputs, options)
        got = run_module(kernel, inputs, options)
        for a, b in zip(got, want, strict=True):
            if not np.array_equal(a, b, equal_nan=True):
                diff = np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))
                why = (f"XLA:CPU reduces this {call.operands[1].type.dims} bag in another "
                       "order than one row after the other (it chose YNNPACK, a tree of "
                       "reduce-windows or a vectorized loop over the bag for this shape): "
                       f"measured max difference {float(np.nanmax(diff)):.3g} against the "
                       "kernel, so the cluster stays in XLA")
                break
        if why:
            break
    _CACHE[key] = why
    return why


def padded_calls(module: Module) -> list[Operation]:
    return [op for op in module.walk() if op.opcode == "custom-call"
            and op.attributes.get("custom_call_target") == PADDED_BAG.name]
