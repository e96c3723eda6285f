"""The values every ember cluster of a rewritten module sees in one run: a copy of the module
whose entry returns, after its own outputs, each cluster's operands and results (tuple results
split into their arrays). One XLA:CPU run of it gives the model's outputs with the native
kernels and, per cluster, the inputs an emulated run of the cluster takes and the outputs the
native kernel computed from them (the functional reference of the emulator)."""

from __future__ import annotations

import dataclasses

import numpy as np

from ember_xla.call_specs import ember_calls
from ember_xla.hlo.shape import Shape
from ember_xla.ir.graph import Module
from ember_xla.ir.operation import Operation


@dataclasses.dataclass
class Captured:
    outputs: list[np.ndarray]                  # the model's own outputs
    operands: dict[str, list[np.ndarray]]      # per cluster (custom-call name)
    results: dict[str, list[np.ndarray]]


class NotCapturable(ValueError):
    """An ember call the capture cannot reach (inside a nested computation)."""


def _leaves(g, op: Operation) -> list:
    t = op.result.type
    if not getattr(t, "tuple_shapes", ()):
        return [op.result]
    out = []
    for i, s in enumerate(t.tuple_shapes):
        gte = g.append(Operation("get-tuple-element", [op.result], [s], {"tuple_index": i},
                                 name=g.unique_name(f"{op.name}.result{i}")))
        out.append(gte.result)
    return out


def capture_module(module: Module, operands: bool = True
                   ) -> tuple[Module, int, list[tuple[str, int, int]]]:
    """(the capturing copy, how many leading outputs are the model's, per call (name,
    operand count, result count) in graph order); ``operands=False``: the calls' results
    only (operand count 0)."""
    m = module.clone()
    g = m.entry
    calls = ember_calls(m, g)
    nested = [op.name for op in ember_calls(m) if op not in calls]
    if nested:
        raise NotCapturable(f"ember call %{nested[0]} is inside a nested computation")
    root = g.root
    own = _leaves(g, root)
    n_own = len(own)
    values = list(own)
    layout = []
    for c in calls:
        res = _leaves(g, c)
        ins = list(c.operands) if operands else []
        values += ins + res
        layout.append((c.name, len(ins), len(res)))
    g.root = g.append(Operation("tuple", values, [Shape.tuple_of([v.type for v in values])],
                                name=g.unique_name("ember_capture")))
    return m, n_own, layout


def capture(module: Module, inputs: list[np.ndarray], operands: bool = True) -> Captured:
    """Run the capturing copy of ``module`` on XLA:CPU (native kernels)."""
    from ember_xla.runtime.execute import run_module

    m, n_own, layout = capture_module(module, operands)
    return split_captured(run_module(m, inputs), n_own, layout)


def split_captured(flat: list[np.ndarray], n_own: int, layout: list[tuple[str, int, int]]
                   ) -> Captured:
    """The outputs of a run of a capturing copy (``capture_module``), split."""
    cap = Captured(flat[:n_own], {}, {})
    pos = n_own
    for name, n_in, n_out in layout:
        cap.operands[name] = flat[pos:pos + n_in]
        cap.results[name] = flat[pos + n_in:pos + n_in + n_out]
        pos += n_in + n_out
    return cap
