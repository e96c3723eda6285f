"""The structure of a ``dlc.configure_access_engine`` block: the tree of traversal units, which
TU each stream belongs to (is evaluated in), and what each TU pushes at each event. The verifier
of the configuration and the DLC interpreter share it.

Rules checked (``EngineError`` otherwise):
- a nested TU's bounds belong to its parent or to an ancestor of it (a root TU's bounds to no
  TU: values computed once when the engine starts);
- a stream belongs to the deepest TU among its operands', which must lie on one chain;
- ``register_operand`` at ``begin``: the stream belongs to a strict ancestor (its value is
  current when the TU starts); at ``iter``: to the TU or an ancestor; at ``end``: to a strict
  ancestor, or it is a vector stream of the vector TU itself (a row buffer);
- only stream ops (no regions, no core-side ops) besides TUs and registrations.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ember_xla.dae_target.dialects.dlc_types import EVENTS, TUType
from ember_xla.dae_target.dialects.slc import StreamType
from ember_xla.ir.operation import Operation
from ember_xla.ir.types import VectorType
from ember_xla.ir.value import Value

if TYPE_CHECKING:
    from ember_xla.dae_target.dialects.dlc import NewTUOp


class EngineError(ValueError):
    """The access-engine configuration breaks a rule of the DLC dialect."""


@dataclasses.dataclass(eq=False)
class TUInfo:
    op: NewTUOp
    parent: TUInfo | None
    depth: int
    children: list[TUInfo] = dataclasses.field(default_factory=list)
    #: stream ops evaluated once per iteration, in program order
    owned: list[Operation] = dataclasses.field(default_factory=list)
    #: ``get_ind_var`` / ``get_mask`` results set each iteration
    ind_vars: list[Value] = dataclasses.field(default_factory=list)
    masks: list[Value] = dataclasses.field(default_factory=list)
    #: event -> registrations in program order
    regs: dict[str, list[Operation]] = dataclasses.field(
        default_factory=lambda: {e: [] for e in EVENTS})
    #: ``register_operand`` ops at ``end`` that push a row buffer of this vector TU
    buffers: list[Operation] = dataclasses.field(default_factory=list)

    @property
    def vl(self) -> int | None:
        return self.op.vl

    def is_ancestor_of(self, other: TUInfo | None) -> bool:
        """``self`` encloses ``other`` (or is it)."""
        while other is not None:
            if other is self:
                return True
            other = other.parent
        return False


@dataclasses.dataclass
class EnginePlan:
    roots: list[TUInfo]
    tus: dict[Operation, TUInfo]
    #: stream ops that belong to no TU (evaluated once when the engine starts)
    once: list[Operation]


_QUERIES = ("dlc.get_ind_var", "dlc.get_mask")
_REGISTER = ("dlc.register_operand", "dlc.register_callback")


def _deepest(owners: list[TUInfo | None], what: str) -> TUInfo | None:
    best: TUInfo | None = None
    for o in owners:
        if o is None:
            continue
        if best is None or best.is_ancestor_of(o):
            best = o
        elif not o.is_ancestor_of(best):
            raise EngineError(f"{what}: reads streams of two unrelated traversal units")
    return best


def _below(owner: TUInfo | None, tu: TUInfo, strict: bool) -> bool:
    """``owner`` is ``tu`` (unless strict) or one of its ancestors, or no TU at all."""
    if owner is None:
        return True
    return owner.is_ancestor_of(tu.parent if strict else tu)


def plan(configure: Operation) -> EnginePlan:
    """Analyse a ``dlc.configure_access_engine`` op (raises ``EngineError``)."""
    owner: dict[Value, TUInfo | None] = {}
    tus: dict[Operation, TUInfo] = {}
    roots: list[TUInfo] = []
    once: list[Operation] = []

    def own(v: Value) -> TUInfo | None:
        return owner.get(v)  # values from outside the configuration belong to no TU

    for op in configure.body.ops:
        where = f"{op.opcode}{' %' + op.name if op.name else ''}"
        if op.regions:
            raise EngineError(f"{where}: ops with regions cannot run on the access engine")
        if op.opcode == "dlc.new_tu":
            parent = tus[op.parent_tu.owner] if op.parent_tu is not None else None
            for b in op.bounds:
                ok = own(b) is None if parent is None else _below(own(b), parent, strict=False)
                if not ok:
                    raise EngineError(f"{where}: a bound belongs to a traversal unit that does "
                                      "not enclose it")
            info = TUInfo(op, parent, 0 if parent is None else parent.depth + 1)
            (parent.children if parent else roots).append(info)
            tus[op] = info
        elif op.opcode in _QUERIES:
            info = tus[op.operands[0].owner]
            (info.ind_vars if op.opcode == "dlc.get_ind_var" else info.masks).append(op.result)
            owner[op.result] = info
        elif op.opcode in _REGISTER:
            info = tus[op.operands[0].owner]
            ev = op.attributes["event"]
            if op.opcode == "dlc.register_operand":
                s = op.operands[1]
                o = own(s)
                buffer = (ev == "end" and o is info and info.vl is not None
                          and isinstance(s.type.elem, VectorType))
                ok = buffer or _below(o, info, strict=ev in ("begin", "end"))
                if not ok:
                    raise EngineError(f"{where}: a stream of another traversal unit cannot be "
                                      f"pushed at {ev} of this one")
                if buffer:
                    info.buffers.append(op)
            info.regs[ev].append(op)
        else:
            if any(isinstance(r.type, TUType) for r in op.results) or not all(
                    isinstance(r.type, StreamType) for r in op.results):
                raise EngineError(f"{where}: only stream ops run on the access engine")
            o = _deepest([own(v) for v in op.operands], where)
            for r in op.results:
                owner[r] = o
            (o.owned if o is not None else once).append(op)
    return EnginePlan(roots, tus, once)
