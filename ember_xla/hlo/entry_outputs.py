"""Make an HLO module's entry return chosen arrays: a value's arrays (tuple elements through
``get-tuple-element``, nested tuples too), and a new root tuple of them. What the probes of
``--verify`` build (the per-cluster and the canonicalization checks)."""

from __future__ import annotations

from ember_xla.hlo.shape import Shape
from ember_xla.ir.block import Block
from ember_xla.ir.graph import Module
from ember_xla.ir.operation import Operation
from ember_xla.ir.value import Value


def append_arrays(g: Block, v: Value, out: list[Value]) -> None:
    """Append ``v``'s arrays to ``out`` (tuple elements through get-tuple-element ops added
    to ``g``, nested tuples too)."""
    _arrays(g, v, v.type, out)


def _arrays(g: Block, v: Value, shape: Shape, out: list[Value]) -> None:
    if not shape.is_tuple:
        out.append(v)
        return
    for i, s in enumerate(shape.tuple_shapes):
        base = v.owner.name if isinstance(v.owner, Operation) else "v"
        gte = g.append(Operation("get-tuple-element", [v], [s], {"tuple_index": i},
                                 name=f"{base}.probe.{i}"))
        _arrays(g, gte.result, s, out)


def return_arrays(module: Module, outs: list[Value], name: str) -> None:
    """Make ``module``'s entry return ``outs`` (a tuple op named ``name``), in place; the
    model's aliasing of outputs to parameters is dropped with its outputs."""
    entry = module.entry
    assert entry is not None
    entry.root = entry.append(Operation("tuple", outs, [Shape.tuple_of([v.type for v in outs])],
                                        name=name))
    for key in ("input_output_alias", "buffer_donor"):  # indices of the model's outputs
        module.attributes.pop(key, None)
