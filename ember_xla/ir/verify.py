"""The generic structural verifier: ownership links, values visible where they are used
(defined earlier in the same block or in an enclosing one, unless a region is isolated from
above), terminators, single-block regions, parents required by traits, and each op's own
``verify_``. Dialect-specific module checks (HLO's) stay with their dialect."""

from __future__ import annotations

from ember_xla.ir.block import Block
from ember_xla.ir.dialect import VerifyError
from ember_xla.ir.graph import Graph, Module
from ember_xla.ir.operation import Operation
from ember_xla.ir.traits import (
    HasParent,
    IsolatedFromAbove,
    IsTerminator,
    NoTerminator,
    SingleBlock,
)
from ember_xla.ir.value import BlockArgument, OpResult, Value


def _where(op: Operation) -> str:
    path = []
    o: Operation | None = op
    while o is not None:
        path.append(o.opcode + (f" %{o.name}" if o.name else ""))
        o = o.parent_op
    b = op.parent
    while b is not None and b.parent_op is not None:
        b = b.parent_op.parent
    g = f"@{b.name}: " if isinstance(b, Graph) else ""
    return g + " in ".join(path)


def _position(block: Block, op: Operation, cache: dict[int, dict[int, int]]) -> int:
    if id(block) not in cache:
        cache[id(block)] = {id(o): i for i, o in enumerate(block.ops)}
    return cache[id(block)][id(op)]


def _visible(v: Value, op: Operation, cache: dict[int, dict[int, int]]) -> bool:
    """Is ``v`` defined before ``op`` in its block or in a block enclosing it?"""
    block: Block | None = op.parent
    at: Operation | None = op
    while block is not None:
        if isinstance(v, BlockArgument) and v.owner is block:
            return True
        if isinstance(v, OpResult) and v.owner.parent is block:
            return _position(block, v.owner, cache) < _position(block, at, cache)
        parent = block.parent_op
        if parent is None or parent.has_trait(IsolatedFromAbove):
            return False
        block, at = parent.parent, parent
    return False


def verify_block(block: Block, require_terminator: bool) -> None:
    position: dict[int, dict[int, int]] = {}
    for i, op in enumerate(block.ops):
        if op.parent is not block:
            raise VerifyError(f"{_where(op)}: parent link broken")
        for pos, v in enumerate(op.operands):
            if (op, pos) not in v.uses:
                raise VerifyError(f"{_where(op)}: use list of operand {pos} is stale")
            if not _visible(v, op, position):
                raise VerifyError(f"{_where(op)}: operand {pos} is not visible here (defined "
                                  "later, in another block, or in a sibling region)")
        if op.has_trait(IsTerminator) and i != len(block.ops) - 1:
            raise VerifyError(f"{_where(op)}: a terminator must end its block")
        for t in type(op).traits:
            if issubclass(t, HasParent):
                parent = op.parent_op
                if parent is None or parent.opcode not in t.parents:
                    raise VerifyError(f"{_where(op)}: must be inside {' or '.join(t.parents)}")
        verify_op(op)
    if require_terminator and (not block.ops or not block.ops[-1].has_trait(IsTerminator)):
        where = _where(block.parent_op) if block.parent_op is not None else "block"
        raise VerifyError(f"{where}: a block of its region does not end in a terminator")


def verify_op(op: Operation) -> None:
    for r in op.regions:
        if r.parent is not op:
            raise VerifyError(f"{_where(op)}: region parent link broken")
        if op.has_trait(SingleBlock) and len(r.blocks) != 1:
            raise VerifyError(f"{_where(op)}: regions must have exactly one block")
        for b in r.blocks:
            if b.parent is not r:
                raise VerifyError(f"{_where(op)}: block parent link broken")
            verify_block(b, require_terminator=not op.has_trait(NoTerminator))
    op.verify_()


def verify_graph(g: Graph, require_terminator: bool = True) -> None:
    verify_block(g, require_terminator)


def verify_generic_module(m: Module) -> None:
    """Verify every function of a module of the Ember levels (HLO: ``hlo.verifier``)."""
    for g in m.graphs:
        verify_graph(g)
