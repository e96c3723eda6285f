"""XLA's simplifier merges a ``reduce`` into a ``reduce`` that consumes it: ``reduce(reduce(x,
dims1), dims2)`` with the same combining computation and an identical init becomes one
``reduce(x, dims1 u dims2)`` (also through the reshapes, transposes and bitcasts between them,
which it folds into the dimensions first, and whatever other users the inner reduce has: it is
kept for them and the merged one recomputes it). So in ``table[ids].sum(1).sum(-1)``, a loss's
``pooled.sum()`` or ``jnp.mean(pooled.sum(-1))`` XLA:CPU never computes the bag's sum on its
own: it adds the rows and the row dim (or the batch) in one order of its own, which a bag kernel
followed by XLA's second reduce does not reproduce bit for bit (measured: f32, [8,6,3] and
[8,6,5]). ``merged_by_xla`` finds such a consumer, so the bag stays in XLA with the reason.

Below YNNPACK's size (whose bag reduce is a fusion of its own) XLA:CPU also fuses a bag's
reduce into a loop fusion rooted at a reduce that reads it through elementwise ops
(``exp(pooled).sum(-1)``, ``(pooled * w).sum(0)``, a loss; also a dot XLA makes a multiply
and a reduce, ``pooled @ w`` at batch 1): the bag's sum is then emitted
inside that loop, in another order than the bag's own loop (measured: f32 [6,4,5], [16,8,5],
not for [64,20,5]). ``fused_by_xla`` finds such a consumer.

From YNNPACK's size on, XLA:CPU gives the bag's reduce to a YNNPACK fusion that also takes in
the elementwise ops reading its result: YNNPACK then computes them with its own kernels, whose
tanh, exp, log, logistic, erf, rsqrt ... are other approximations than XLA's, and which
contract a multiply feeding an add (measured, f32 [256,16,64]: tanh, exp, logistic, log,
rsqrt, erf, expm1, log1p and ``x * c + d`` differ after the rewrite, when XLA computes them,
also before a dot or a concatenate; sqrt, multiply, divide, max, square did not, nor any op
whose chain ends in a reduce). ``computed_by_ynnpack`` finds such ops."""

from __future__ import annotations

from collections.abc import Callable

from ember_xla.hlo.opcodes import ELEMENTWISE
from ember_xla.ir.operation import Operation
from ember_xla.native.padded_order import YNN_MIN_ELEMENTS, ynn_reduces
from ember_xla.rewrites import ynn_fusions
from ember_xla.rewrites.refs import Ref, binary_combiner, scalar_constant
from ember_xla.rewrites.same_value import same_value

#: Ops XLA folds into a consuming reduce's dimensions (or removes) before merging.
_PASS_THROUGH = ("reshape", "transpose", "bitcast", "copy")


def _walk(start: list[Operation], passes: Callable[[Operation], bool]
          ) -> tuple[list[Operation], list[Operation]]:
    """(the ops reached from ``start`` that ``passes`` and that are walked on through their
    single result, the other ops reached), each op once."""
    walked: list[Operation] = []
    ends: list[Operation] = []
    todo, seen = list(start), set()
    while todo:
        u = todo.pop()
        if id(u) in seen:
            continue
        seen.add(id(u))
        if len(u.results) == 1 and passes(u):
            walked.append(u)
            todo.extend(u.result.users)
        else:
            ends.append(u)
    return walked, ends


def _reached(op: Operation, passes: Callable[[Operation], bool]) -> list[Operation]:
    """Every op reading ``op``'s result through ops that ``passes`` (single-result ones only)."""
    return _walk(op.result.users, passes)[1]


def _layout_only(u: Operation) -> bool:
    """Layout-only ops and no-op converts."""
    return u.opcode in _PASS_THROUGH or (
        u.opcode == "convert" and u.result.type.element_type == u.operands[0].type.element_type)


def _consumers(op: Operation) -> list[Operation]:
    """The ops that read ``op``'s result through layout-only ops (and no-op converts)."""
    return list(_reached(op, _layout_only))


def merged_by_xla(op: Operation) -> str | None:
    """Why XLA:CPU merges the reduce ``op`` into a reduce consuming it (so ``op``'s own result
    is never computed in its order), or None."""
    if op.opcode != "reduce" or len(op.operands) != 2:
        return None
    comb = binary_combiner(op)
    init = scalar_constant(Ref(op.operands[1]))
    if comb is None or init is None:
        return None
    etype = op.result.type.element_type
    for u in _consumers(op):
        if (u.opcode == "reduce" and len(u.operands) == 2
                and u.result.type.element_type == etype
                and binary_combiner(u) == comb
                and scalar_constant(Ref(u.operands[1])) == init):
            return (f"reduce {op.name} feeds reduce {u.name} with the same {comb} and init: "
                    "XLA:CPU merges the two into one reduce over both dims (another order of "
                    "adds than the bag's own sum), so the cluster stays in XLA")
    return None


#: Reductions and other ops that are not elementwise even where ELEMENTWISE's arity says so.
_NOT_ELEMENTWISE = ("reduce", "reduce-window", "scatter", "select-and-scatter", "map", "sort")


def _dot_product(op: Operation) -> bool:
    """A dot whose operands have no free dimensions of more than one element (``pooled @ w``
    at batch 1): XLA's simplifier makes it a multiply and a reduce."""
    if op.opcode != "dot" or len(op.operands) != 2:
        return False
    dn = op.attributes.get("dot_dimension_numbers", {})
    for side, v in zip(("lhs", "rhs"), op.operands, strict=True):
        bound = {int(x) for k in ("batch", "contracting")
                 for x in dn.get(f"{side}_{k}_dimensions", [])}
        if any(n != 1 for i, n in enumerate(v.type.dims) if i not in bound):
            return False
    return True


def _elementwise(u: Operation) -> bool:
    """Elementwise, broadcast and layout ops, which a consuming reduce's loop fusion takes in."""
    if u.opcode in _NOT_ELEMENTWISE or _dot_product(u):
        return False
    return u.opcode in ELEMENTWISE or u.opcode in _PASS_THROUGH + ("broadcast", "convert")


def fused_by_xla(op: Operation) -> str | None:
    """Why XLA:CPU may fuse the reduce ``op`` into a loop fusion rooted at a reduce that reads
    it through elementwise, broadcast and layout ops (computing ``op`` inside that loop, in
    another order), or None."""
    for u in _reached(op, _elementwise):
        if u.opcode == "reduce" or _dot_product(u):
            return (f"reduce {op.name} reaches {u.opcode} {u.name} through elementwise ops: "
                    "XLA:CPU fuses the bag's sum into that reduce's loop, where it adds the "
                    "rows in another order than the bag's own loop, so the cluster stays in "
                    "XLA")
    return None


#: Exact elementwise ops (ynn_fusions.EXACT_ELEMENTWISE), broadcasts and layout ops: the same
#: bits whoever computes them.
_EXACT = ynn_fusions.EXACT_ELEMENTWISE | {"broadcast"} | frozenset(_PASS_THROUGH)


def _ynn_fusible(u: Operation) -> bool:
    """An op the bag's YNNPACK fusion grows through: layout ops, dots (a dense layer over the
    bag, and the ops after it: measured, ``sigmoid(pooled @ w)`` is one YNNPACK fusion with
    the bag's reduce, while the same dot reading a custom call is a YNNPACK fusion of the dot
    alone, the sigmoid left to XLA's loop, in other bits) and elementwise ops YNNPACK takes
    (xla/backends/cpu/ynn_support.cc, IsInstructionPreferredByYnn): of at least
    YNN_MIN_ELEMENTS values in their result or an operand (a logistic regression's [B, 1]
    logits are XLA's on both sides)."""
    if u.opcode == "dot":
        # only into a dot whose computed operands it alone reads (measured: a masked mean
        # also returned as a value, ``h`` in ``(tanh(h @ w), h)``, ends the fusion there)
        return all(len(v.users) == 1 for v in u.operands
                   if isinstance(v.owner, Operation)
                   and v.owner.opcode not in ("parameter", "constant"))
    if u.opcode in _PASS_THROUGH or u.opcode == "broadcast":
        return True
    return _elementwise(u) and any(
        v.type.is_array and v.type.size >= YNN_MIN_ELEMENTS
        for v in [u.result, *u.operands])


def _under_converts(op: Operation, inside: set[int]) -> Operation:
    """``op``, or the op under its chain of converts and layout ops within the fusion (a
    product rounded to bf16 before the add is still the add's product to XLA's loop, which
    with excess precision drops that rounding)."""
    while (op is not None and id(op) in inside and op.operands
           and (op.opcode == "convert" or op.opcode in _PASS_THROUGH)):
        op = op.operands[0].owner
    return op


def _product(op: Operation) -> bool:
    """A multiply, or a divide by a constant, which XLA's simplifier turns into a multiply by
    its reciprocal (measured: ``c + t[ids].sum(1) / 10`` is ``c + pooled * 0.1`` in the bag's
    YNNPACK fusion, and a fused multiply-add in XLA's loop once the bag is a custom call)."""
    if op.opcode == "multiply":
        return True
    if op.opcode != "divide" or len(op.operands) != 2:
        return False
    d = op.operands[1].owner
    while d is not None and d.opcode in ("broadcast", "reshape", "convert"):
        d = d.operands[0].owner
    return d is not None and d.opcode == "constant"


def computed_by_ynnpack(op: Operation) -> str | None:
    """Why the bag's YNNPACK fusion computes an op reading the reduce ``op`` (through
    elementwise ops and dots) in other bits than XLA:CPU does once the bag is a custom call:
    an op that is not correctly rounded, or a multiply of the bag (or a divide by a constant:
    a multiply by its reciprocal to XLA) feeding an add or subtract (contracted into a fused
    multiply-add on one side only); None when every such op is exact alone, or when those ops
    end in reduces only (XLA's loop fusion of the consuming reduce takes them in, measured equal:
    ``exp(pooled).sum(-1)``, ``tanh(pooled).sum(-1)``), or when the reduce (with its identical
    twins, which XLA's CSE merges) has more than one reader: YNNPACK then fuses none of them
    (measured: ``tanh(pooled)`` beside ``pooled @ w``)."""
    twins = [o for o in op.parent.ops if o is op or (
        o.opcode == "reduce" and same_value(o.result, op.result))]
    # distinct readers: after XLA's CSE the twins are one reduce, so ``p * p`` of two twins
    # is one reader (measured: ``t[i].sum(1) * t[i].sum(1) + c`` is one YNNPACK fusion)
    readers = list({id(u): u for t in twins for u in t.result.users}.values())
    if len(readers) != 1:
        return None  # XLA's CSE leaves one reduce read by several ops: YNNPACK takes none in
    region, ends = _walk(readers, _ynn_fusible)
    if not region or (ends and all(u.opcode == "reduce" for u in ends)):
        return None  # a consuming reduce's loop fusion takes the ops in (XLA computes them)
    inside = {id(u) for u in region}
    for u in region:
        if u.opcode == "dot":
            continue  # the products of a dot are summed in the dot's own order either way
        if u.opcode not in _EXACT:
            why = f"{u.opcode} {u.name}, which YNNPACK approximates in its own way"
        elif u.opcode in ("add", "subtract") and any(
                o is not None and _product(o) and id(o) in inside
                for o in (_under_converts(v.owner, inside) for v in u.operands)):
            why = (f"{u.opcode} {u.name} of a product, which one side contracts into a fused "
                   "multiply-add and the other does not")
        else:
            continue
        return (f"reduce {op.name} is one YNNPACK fusion with the ops reading it, among them "
                f"{why}; computed by XLA:CPU after the rewrite it gives other bits, so the "
                "cluster stays in XLA")
    return None


def weights_computed_by_ynnpack(weights: Operation | None, fused: list[Operation]
                                ) -> str | None:
    """Why the bag's YNNPACK fusion (the ops ``fused``: the reduce, the multiply by the
    weights, their broadcast) also computes an op producing the weights in other bits than
    XLA:CPU does once the bag is a custom call: growing upwards, the fusion takes an operand
    when YNNPACK supports it (``_ynn_fusible``) and every user of it is in the fusion, so a
    ``tanh`` or an ``exp`` of [B, P] weights of 4096+ values is YNNPACK's (measured:
    ``(t[ids] * jnp.tanh(s)[..., None]).sum(1)`` at [2048,20,32] gave other bits rewritten;
    at [256,10,64] the weights are too few and XLA computes them on both sides). None when
    no such op is taken in."""
    for red in (o for o in fused if o.opcode == "reduce"):
        known = ynn_fusions.verdict(red)  # XLA's own fusion, read: weights included
        if known is not ynn_fusions.UNKNOWN:
            return known
    inside = {id(o) for o in fused}
    todo, walked = [weights], set()
    while todo:  # an op refused now is pushed again when another of its users joins
        op = todo.pop()
        if not isinstance(op, Operation):
            continue
        if id(op) in inside:
            if id(op) in walked:
                continue
        elif (len(op.results) != 1 or not op.result.users or not _ynn_fusible(op)
                or not all(id(u) in inside for u in op.result.users)):
            continue
        else:
            inside.add(id(op))
            if op.opcode != "dot" and op.opcode not in _EXACT:
                return (f"the bag's YNNPACK fusion also computes its weights' "
                        f"{op.opcode} {op.name}, which YNNPACK approximates in its own "
                        "way; computed by XLA:CPU after the rewrite it gives other bits, "
                        "so the cluster stays in XLA")
        walked.add(id(op))
        todo.extend(x.owner for x in op.operands)
    return None


def computed_with_consumer(op: Operation) -> str | None:
    """Why XLA:CPU computes the bag reduce ``op`` together with an op reading it, by the size
    of its operand: below YNNPACK's, inside a consumer's loop fusion (``fused_by_xla``); from
    it on, YNNPACK's fusion computing the consumer in other bits (as read from XLA's optimized
    original module, ``ynn_fusions``; where it was not read, ``computed_by_ynnpack``); else
    None."""
    x = op.operands[0].type
    if x.element_type == "f32" and ynn_reduces(x.size):
        known = ynn_fusions.verdict(op)
        return computed_by_ynnpack(op) if known is ynn_fusions.UNKNOWN else known
    return fused_by_xla(op)
