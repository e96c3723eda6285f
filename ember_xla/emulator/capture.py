"""The values every ember cluster of a rewritten module sees in one run: a copy of the module
whose entry returns, after its own outputs, each cluster's operands and results (tuple results
split into their arrays). One XLA:CPU run of it gives the model's outputs with the native
kernels and, per cluster, the inputs an emulated run of the cluster takes and the outputs the
native kernel computed from them (the functional reference of the emulator).

An operand that is an entry parameter (typically a table) is not returned: the caller holds it
already (``split_captured`` takes it from the run's inputs), so a large table is not copied
out of the run."""

from __future__ import annotations

import dataclasses

import numpy as np

from ember_xla.call_specs import ember_calls
from ember_xla.hlo.shape import Shape
from ember_xla.ir.graph import Module
from ember_xla.ir.operation import Operation


@dataclasses.dataclass
class Captured:
    outputs: list[np.ndarray]  # the model's own outputs
    operands: dict[str, list[np.ndarray]]  # per cluster (custom-call name)
    results: dict[str, list[np.ndarray]]


#: Per call of a capturing copy: (its name, per operand the entry parameter number it is, or
#: CAPTURED when the run returns it, the number of its results).
CallLayout = tuple[str, tuple[int, ...], int]
CAPTURED = -1


class NotCapturable(ValueError):
    """An ember call the capture cannot reach (inside a nested computation)."""


def _leaves(g, op: Operation) -> list:
    t = op.result.type
    if not getattr(t, "tuple_shapes", ()):
        return [op.result]
    out = []
    for i, s in enumerate(t.tuple_shapes):
        gte = g.append(
            Operation(
                "get-tuple-element",
                [op.result],
                [s],
                {"tuple_index": i},
                name=g.unique_name(f"{op.name}.result{i}"),
            )
        )
        out.append(gte.result)
    return out


def _parameter_number(g, v) -> int:
    """The entry parameter number of value ``v``, or CAPTURED when it is computed."""
    op = v.owner
    if getattr(op, "opcode", None) != "parameter" or getattr(op, "parent", None) is not g:
        return CAPTURED
    return int(op.attributes.get("parameter_number", 0))  # absent: 0 (the proto default)


def capture_module(module: Module, operands: bool = True) -> tuple[Module, int, list[CallLayout]]:
    """(the capturing copy, how many leading outputs are the model's, per call its
    ``CallLayout`` in graph order); ``operands=False``: the calls' results only (no
    operands)."""
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
        sources = tuple(_parameter_number(g, v) for v in ins)
        values += [v for v, p in zip(ins, sources, strict=True) if p == CAPTURED] + res
        layout.append((c.name, sources, len(res)))
    g.root = g.append(
        Operation(
            "tuple",
            values,
            [Shape.tuple_of([v.type for v in values])],
            name=g.unique_name("ember_capture"),
        )
    )
    return m, n_own, layout


def capture(module: Module, inputs: list[np.ndarray], operands: bool = True) -> Captured:
    """Run the capturing copy of ``module`` on XLA:CPU (native kernels)."""
    from ember_xla.runtime.execute import run_module

    m, n_own, layout = capture_module(module, operands)
    return split_captured(run_module(m, inputs), n_own, layout, inputs)


def split_captured(
    flat: list[np.ndarray],
    n_own: int,
    layout: list[CallLayout],
    inputs: list[np.ndarray] | None = None,
) -> Captured:
    """The outputs of a run of a capturing copy (``capture_module``) on ``inputs``, split
    (operands that are entry parameters are the run's inputs)."""
    cap = Captured(flat[:n_own], {}, {})
    pos = n_own
    for name, sources, n_out in layout:
        ops = []
        for p in sources:
            if p == CAPTURED:
                ops.append(flat[pos])
                pos += 1
            elif inputs is None:
                raise ValueError(
                    f"capture of %{name}: operand is parameter {p}, and the "
                    "run's inputs were not given"
                )
            else:  # read-only, as the arrays a run returns
                x = np.asarray(inputs[p]).view()
                x.flags.writeable = False
                ops.append(x)
        cap.operands[name] = ops
        cap.results[name] = flat[pos : pos + n_out]
        pos += n_out
    return cap
