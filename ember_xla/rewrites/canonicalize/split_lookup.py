"""``split-shared-lookup``: one lookup feeding several reductions (``segment_sum`` and
``segment_max`` of the same gathered messages, a bag's sum and max) gets a private copy per
reduction, so each becomes its own cluster. Lookups are pure, so the copies compute the same
rows; after outlining, the segment reductions of one lookup are merged again into one
``ember.multi_segment_reduce`` call that reads the rows once (rewrites/multi_output.py).

A lookup is a ``gather`` of a rank-2 table, or a ``select`` whose value operand is one (the
``jnp.take`` fill, a mask), or such rows times broadcast weights (weighted messages ``x[src] *
w[:, None]`` aggregated twice); its copy takes the backward slice of index arithmetic with it
(up to 64 pure ops; parameters and constants are shared). Each user that is a bag reduction
(``scatter``, ``reduce`` over the bag axis) or a ``multiply``/``convert``/``select`` feeding
one gets a copy; when every user does, the first keeps the original. Rows that also escape
elsewhere (a GAT's attention logits read the gathered sender features its messages are made
of; a model returns the rows) stay with those users, and the reduction's cluster reads the
rows again from the table, as XLA, fusing the gather into each of its consumers, does too.
Likewise a mask or weights broadcast over the rows that a bag shares with other code (a
training step's backward selects its gradient rows with the forward's broadcast mask): the
bag's select or multiply gets its own copy of the broadcast chain."""

from __future__ import annotations

from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import register_pass
from ember_xla.ir.rewriter import PatternRewriter, RewritePattern
from ember_xla.ir.value import Value
from ember_xla.rewrites.canonicalize.base import PURE, PatternPass

_STEPS = ("multiply", "convert", "select")
_LIMIT = 64


def _is_lookup(v: Value, weighted: bool = True) -> bool:
    op = v.owner
    if weighted and op.opcode == "multiply" and len(op.operands) == 2:
        a, b = op.operands
        return any(_is_lookup(x, False) and y.owner.opcode in ("broadcast", "reshape")
                   for x, y in ((a, b), (b, a)))
    if op.opcode == "select" and len(op.operands) == 3:
        op = op.operands[1].owner
    return op.opcode == "gather" and op.operands[0].type.rank == 2


def _is_bag_reduction(op: Operation) -> bool:
    """A segment reduction or a padded bag's reduce over the bag axis (what a cluster roots)."""
    if op.opcode == "scatter":
        return True
    return (op.opcode == "reduce" and op.operands[0].type.rank == 3
            and op.attributes.get("dimensions", []) == [1])


def _feeds_reduction(user: Operation) -> bool:
    if _is_bag_reduction(user):
        return True
    return user.opcode in _STEPS and len(user.users) == 1 and _is_bag_reduction(user.users[0])


def _cone(v: Value) -> list[Operation] | None:
    """Pure non-leaf ops computing ``v``, operands first; None when larger than the limit."""
    order: list[Operation] = []
    seen: set[int] = set()

    def visit(op: Operation) -> bool:
        if id(op) in seen or op.opcode in ("parameter", "constant"):
            return True
        seen.add(id(op))
        if op.opcode not in PURE or op.opcode in ("dot", "call", "scatter"):
            return False
        for o in op.operands:
            if not visit(o.owner):
                return False
        order.append(op)
        return len(order) <= _LIMIT

    return order if visit(v.owner) else None


class SplitSharedLookup(RewritePattern):
    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if len(op.results) != 1 or not _is_lookup(op.result):
            return
        users = op.result.users
        feeding = [u for u in users if _feeds_reduction(u)]
        if len(users) < 2 or not feeding:
            return
        cone = _cone(op.result)
        if cone is not None:
            _give_copies(rw, op, cone, users, feeding)


def _give_copies(rw: PatternRewriter, op: Operation, ops: list[Operation],
                 users: list[Operation], feeding: list[Operation]) -> None:
    """Give each of ``feeding`` (users of ``op`` feeding a reduction) its own copy of ``ops``
    (computing ``op``, operands first; their other operands shared); when every user feeds
    one, the first keeps the original."""
    for user in feeding[1:] if len(feeding) == len(users) else feeding:
        mapping: dict[int, Value] = {}
        for inner in ops:
            clone = inner.clone([mapping.get(id(o), o) for o in inner.operands])
            rw.insert_before(op, clone)
            mapping[id(inner.result)] = clone.result
        copy = mapping[id(op.result)]
        for u, pos in list(op.result.uses):
            if u is user:
                rw.set_operand(u, pos, copy)


_MOVES = ("broadcast", "reshape", "bitcast")


def _moves(v: Value) -> list[Operation]:
    """The broadcasts/reshapes computing ``v`` from a value that is none, operands first."""
    chain: list[Operation] = []
    op = v.owner
    while op.opcode in _MOVES and len(op.operands) == 1 and len(chain) < _LIMIT:
        chain.append(op)
        op = op.operands[0].owner
    return chain[::-1]


class SplitSharedMask(RewritePattern):
    """A mask or weights spread over the rows (``broadcast(m)`` [B, P, D]) that a bag's select
    or multiply shares with other code (a training step's backward selects the gradient rows
    with the same broadcast): each such user feeding a bag reduction gets its own copy of the
    broadcast chain, so the cluster can claim it (the copies compute the same values)."""

    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode != "broadcast" or len(op.results) != 1:
            return
        users = op.result.users
        feeding = [u for u in users if u.opcode in ("select", "multiply")
                   and _feeds_reduction(u)]
        if len(users) >= 2 and feeding:
            _give_copies(rw, op, _moves(op.result), users, feeding)


@register_pass
class SplitSharedLookupPass(PatternPass):
    name = "split-shared-lookup"
    rewrites = (SplitSharedLookup, SplitSharedMask)
