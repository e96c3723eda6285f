"""Rules XLA's HLO verifier enforces before shape inference, which the rewrites rely on: operand
and called-computation counts of the variadic opcodes, the parameter count of each callee
against its caller, and well-formed shapes (dims in [0, 2^63), element counts that fit int64,
bounded tuple nesting, layouts that permute the dims). Each check returns a problem description
or ``None``."""

from __future__ import annotations

from ember_xla.hlo.shape import Shape
from ember_xla.ir.operation import Operation

MAX_TUPLE_DEPTH = 32  # protobuf refuses messages nested ~100 deep; XLA's own modules use < 5
_INT64 = 2**63

# opcode -> (minimum operand count, operand count must be a multiple of this)
_OPERANDS = {"reduce": (2, 2), "reduce-window": (2, 2), "sort": (1, 1), "concatenate": (1, 1),
             "dynamic-slice": (1, 1), "dynamic-update-slice": (2, 1), "conditional": (1, 1),
             "map": (1, 1), "select-and-scatter": (3, 3), "rng": (2, 2),
             "batch-norm-training": (3, 3), "batch-norm-inference": (5, 5),
             "batch-norm-grad": (5, 5), "scatter": (3, 1)}
# opcode -> number of called computations
_CALLEES = {"call": 1, "fusion": 1, "map": 1, "reduce": 1, "reduce-window": 1, "scatter": 1,
            "sort": 1, "while": 2, "select-and-scatter": 2, "all-reduce": 1,
            "reduce-scatter": 1}


def check_shape(shape: Shape) -> str | None:
    stack = [(shape, 0)]
    while stack:
        s, depth = stack.pop()
        if s.is_tuple:
            if depth >= MAX_TUPLE_DEPTH:
                return f"tuple shape nested more than {MAX_TUPLE_DEPTH} deep"
            stack.extend((t, depth + 1) for t in s.tuple_shapes)
            continue
        lay = s.layout
        if lay and sorted(lay) != list(range(len(s.dims))):
            return (f"layout {{{','.join(map(str, lay))}}} of {s.element_type}{list(s.dims)} is "
                    f"not a permutation of its {len(s.dims)} dimensions")
        n = 1
        for d in s.dims:
            if not 0 <= d < _INT64:
                return f"dimension {d} of {s.element_type}{list(s.dims)} is outside [0, 2^63)"
            n *= d
        if n >= _INT64:
            return f"shape {s.element_type}{list(s.dims)} has {n} elements, more than int64 holds"
    return None


def _params(callee: object) -> int:
    return len(callee.params())  # type: ignore[attr-defined]


def _leaves(s: Shape) -> int:
    return sum(_leaves(t) for t in s.tuple_shapes) if s.is_tuple else 1


def check_counts(op: Operation) -> str | None:
    k, code = len(op.operands), op.opcode
    rep = op.attributes.get("parameter_replication")
    if isinstance(rep, dict):  # XLA CHECK-fails (aborts) on a mismatch
        n, want = len(rep.get("replicated_at_leaf_buffers", [])), _leaves(op.result.type)
        if n and n != want:
            return f"parameter_replication has {n} entries for {want} leaf buffer(s)"
    rule = _OPERANDS.get(code)
    if rule and (k < rule[0] or k % rule[1]):
        return (f"{code} takes at least {rule[0]} operands in multiples of {rule[1]}, has {k}")
    if code == "scatter" and k % 2 == 0:
        return f"scatter takes 2n+1 operands (n inputs, indices, n updates), has {k}"
    if code in ("dynamic-slice", "dynamic-update-slice"):
        first = 2 if code == "dynamic-update-slice" else 1
        src = op.operands[0].type
        if src.is_array and k != first + src.rank:
            return f"{code} of a rank-{src.rank} operand takes {first + src.rank} operands, has {k}"
    want = _CALLEES.get(code)
    if want is not None and len(op.callees) != want:
        return f"{code} calls {want} computation(s), has {len(op.callees)}"
    if code == "conditional" and len(op.callees) != k - 1:
        return f"conditional has {len(op.callees)} branches for {k - 1} branch operands"
    if not op.callees:
        return None
    c0 = op.callees[0]
    expect = {"call": k, "fusion": k, "map": k, "reduce": k, "reduce-window": k,
              "sort": 2 * k, "scatter": k - 1, "select-and-scatter": None}.get(code)
    if code == "while":
        expect = k
        if any(_params(c) != 1 for c in op.callees):
            return "while condition and body take exactly 1 parameter"
    if expect is not None and _params(c0) != expect:
        return f"{code} calls {c0.name} (takes {_params(c0)} parameters) with {expect} values"
    return None
