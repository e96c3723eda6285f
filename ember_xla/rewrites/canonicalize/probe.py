"""The canonicalization probe: what each canonicalization replaced, side by side with what
replaced it, for XLA:CPU to compute in the model.

The cluster probe (``runtime.cluster_check``) checks a kernel against its outlined
computation, which is the cluster *after* canonicalization; an order the canonical form
changes is not seen there. This probe closes that gap: it canonicalizes a copy of the model
as the rewrite does, recording every value a pattern replaced, and gives two modules with the
same parameters — the original and the canonical model — whose entries return the model's own
outputs (so XLA fuses and orders what surrounds them as in the model) followed by, per
replacement, the original value (first module) and the value that stands in its place at the
end of canonicalization (second module). XLA:CPU runs both on the same inputs
(``runtime.canonical_check``): the canonical form must compute, bit for bit, what the original
computes. A replacement inside a computation the canonical entry still calls (a loop body) is
listed as unchecked; one inside a computation that was inlined is checked through the value of
its call in the entry."""

from __future__ import annotations

import dataclasses

from ember_xla.hlo.entry_outputs import append_arrays, return_arrays
from ember_xla.hlo.shape import Shape
from ember_xla.ir.graph import Module
from ember_xla.ir.operation import Operation
from ember_xla.ir.rewriter import recording_replacements
from ember_xla.ir.value import Value
from ember_xla.rewrites.canonicalize import canonicalize


@dataclasses.dataclass(frozen=True)
class Replacement:
    """One original entry value the canonicalization replaced: the instruction, its result
    index, its opcode, what stands in its place at the end (opcode), and how many arrays it
    is (a tuple-shaped value counts its leaves)."""
    instruction: str
    result: int
    opcode: str
    canonical: str
    arrays: int


@dataclasses.dataclass
class CanonicalProbe:
    """The two probe modules (outputs: the model's arrays, then each replacement's arrays),
    the number of the model's own arrays, the replacements in output order, and the
    replaced instructions the probe does not check (outside the entry, with their graph)."""
    original: Module
    canonical: Module
    model_arrays: int
    replacements: list[Replacement]
    unchecked: list[str]


def _count(shape: Shape) -> int:
    return sum(_count(s) for s in shape.tuple_shapes) if shape.is_tuple else 1


def _checkable(shape: Shape) -> bool:
    if shape.is_tuple:
        return all(_checkable(s) for s in shape.tuple_shapes)
    return shape.is_array


def _returning(module: Module, extra: list[Value]) -> int:
    """Make ``module``'s entry return its own arrays followed by ``extra``'s (in place);
    returns the number of its own arrays."""
    entry = module.entry
    assert entry is not None and entry.root is not None
    own: list[Value] = []
    append_arrays(entry, entry.root.result, own)
    extras: list[Value] = []
    for v in extra:
        append_arrays(entry, v, extras)
    return_arrays(module, own + extras, "canonical.probe.root")
    return len(own)


def _final(v: Value, forward: dict[Value, Value]) -> Value:
    seen: set[int] = set()
    while v in forward and id(v) not in seen:
        seen.add(id(v))
        v = forward[v]
    return v


def canonical_probe(module: Module, assume_finite_tables: bool = False,
                    xla_order: bool = True) -> CanonicalProbe:
    """The probe of ``module`` (not modified) under the default canonicalization pipeline
    with these options (the rewrite's own)."""
    canon = module.clone()
    entry = canon.entry
    assert entry is not None and module.entry is not None
    # each op before canonicalization and its graph (the refs keep the ids unique)
    originals = {id(op): (op, g) for g in canon.graphs for op in g.ops}
    with recording_replacements() as pairs:
        canonicalize(canon, assume_finite_tables=assume_finite_tables, xla_order=xla_order)
    called = Module.reachable([entry])
    forward: dict[Value, Value] = {}
    for old, new in pairs:
        forward.setdefault(old, new)
    names = {op.name for op in module.entry.ops}
    found: list[tuple[Replacement, Value]] = []
    unchecked: list[str] = []
    seen: set[int] = set()
    for old, _ in pairs:
        op = old.owner
        op0, g = originals.get(id(op), (None, None))
        if op0 is not op or id(old) in seen:
            continue
        seen.add(id(old))
        if g is not entry:
            if id(g) in called:  # else inlined: checked as its call's value in the entry
                unchecked.append(f"{op.name} (in {g.name})")
            continue
        new = _final(old, forward)
        if (not isinstance(new.owner, Operation) or new.owner.parent is not entry
                or not _checkable(old.type) or op.name not in names
                or new.type.to_text(False) != old.type.to_text(False)):
            continue  # replaced again by what a later replacement covers, or no array
        found.append((Replacement(op.name, op.results.index(old), op.opcode,
                                  new.owner.opcode, _count(old.type)), new))
    original = module.clone()
    assert original.entry is not None
    by_name = {op.name: op for op in original.entry.ops}
    n = _returning(original, [by_name[r.instruction].results[r.result] for r, _ in found])
    _returning(canon, [new for _, new in found])
    return CanonicalProbe(original, canon, n, [r for r, _ in found], unchecked)
