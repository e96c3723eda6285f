"""Navigating values across ``call`` boundaries, and searching an op's producers.

A ``Ref`` is a value together with the stack of ``call`` ops the walk has stepped into.
``resolve`` steps *into* a call (to its callee's root) and *out of* a callee parameter (to the
calling op's operand), so patterns see through JAX's ``_take``/``_where`` helper calls.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import TypeVar

import numpy as np

from ember_xla.hlo.literal import literal_to_numpy
from ember_xla.ir.operation import Operation
from ember_xla.ir.value import Value


@dataclasses.dataclass(frozen=True)
class Ref:
    value: Value
    stack: tuple[Operation, ...] = ()

    @property
    def op(self) -> Operation:
        return self.value.owner

    @property
    def top(self) -> bool:
        """True when the value lives in the computation the walk started in."""
        return not self.stack

    def operand(self, i: int) -> Ref:
        return resolve(Ref(self.op.operands[i], self.stack))


T = TypeVar("T")


def first_producer(op: Operation, depth: int, pick: Callable[[Operation], T | None],
                   behind: frozenset[str] = frozenset()) -> T | None:
    """The first non-None ``pick(p)`` over the ops ``p`` that produce ``op``'s operands,
    breadth first within ``depth`` steps, not searching behind ops whose opcode is in
    ``behind``; None if there is none."""
    frontier, seen = [op], set()
    for _ in range(depth):
        nxt = []
        for o in frontier:
            for v in o.operands:
                d = v.owner
                if d is None or id(d) in seen:
                    continue
                seen.add(id(d))
                found = pick(d)
                if found is not None:
                    return found
                if d.opcode not in behind:
                    nxt.append(d)
        frontier = nxt
    return None


def resolve(ref: Ref, visited: list[Operation] | None = None) -> Ref:
    """Follow calls and callee parameters until a real defining op; record calls entered from
    the top level in ``visited``."""
    while True:
        op = ref.value.owner
        if op.opcode == "call" and op.callees:
            if visited is not None and not ref.stack:
                visited.append(op)
            ref = Ref(op.callees[0].root.result, ref.stack + (op,))
        elif op.opcode == "parameter" and ref.stack:
            call = ref.stack[-1]
            num = op.attributes.get("parameter_number", 0)
            ref = Ref(call.operands[num], ref.stack[:-1])
        else:
            return ref


def step_out(ref: Ref) -> Ref:
    """From a callee parameter to the calling op's operand, as far as that goes (without
    stepping into any call)."""
    while ref.op.opcode == "parameter" and ref.stack:
        call = ref.stack[-1]
        ref = Ref(call.operands[ref.op.attributes.get("parameter_number", 0)], ref.stack[:-1])
    return ref


def scalar_constant(ref: Ref) -> float | None:
    """The value of ``constant(c)``, ``broadcast(constant(c))`` or ``convert(constant(c))``
    (a real c: None for a complex constant)."""
    ref = resolve(ref)
    op = ref.op
    while op.opcode in ("broadcast", "convert", "reshape") and len(op.operands) == 1:
        ref = ref.operand(0)
        op = ref.op
    if op.opcode != "constant":
        return None
    try:
        arr = np.asarray(literal_to_numpy(op.attributes.get("literal", {})))
    except ValueError:
        return None
    flat = arr.reshape(-1)
    if np.iscomplexobj(flat):
        return None  # not a real scalar
    if flat.size == 0 or not (np.all(flat == flat[0]) or np.all(np.isnan(flat.astype(float)))):
        return None
    return float(flat[0]) if flat.dtype != np.bool_ else float(bool(flat[0]))


def plus_zero(ref: Ref) -> bool:
    """Is ``ref`` a +0.0 constant (or a splat of one): not -0.0, which adds differently?"""
    c = scalar_constant(ref)
    return c is not None and c == 0.0 and math.copysign(1.0, c) > 0


def binary_combiner(op: Operation) -> str | None:
    """``add``/``maximum``/``minimum``/``and`` if ``op``'s single callee is that op applied
    to its two parameters."""
    if len(op.callees) != 1:
        return None
    g = op.callees[0]
    root = g.root
    params = g.params()
    if len(params) != 2 or len(root.operands) != 2:
        return None
    if {v.owner.name for v in root.operands} != {p.name for p in params}:
        return None
    if root.opcode in ("add", "maximum", "minimum", "and", "multiply"):
        return root.opcode
    return None


def unclamped(v: Value, rows: int) -> Value | None:
    """x if ``v`` is ``clamp(0, x, rows - 1)`` (a clip-mode clamp of row ids), else None."""
    op = v.owner
    if op is None or op.opcode != "clamp" or len(op.operands) != 3:
        return None
    lo, hi = (scalar_constant(Ref(op.operands[i])) for i in (0, 2))
    return op.operands[1] if lo == 0 and hi == rows - 1 else None
