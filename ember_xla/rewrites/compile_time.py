"""Clusters XLA:CPU computes before the module runs: every input of the cluster (table, ids,
weights, mask) is a constant or computed from constants only -- a table and ids captured from
Python as numpy arrays --, so XLA's constant folding evaluates the cluster's ops at compile
time, with its evaluator (measured on a constant [128,10,64] bag: neither its own loop's
order nor YNNPACK's blocked one), and the module only reads the result. Such a cluster stays
in XLA: a kernel would compute at run time what XLA computed at compile time, in another
order."""

from __future__ import annotations

from ember_xla.ir.operation import Operation
from ember_xla.ir.value import Value
from ember_xla.rewrites.cluster import Cluster

#: ops XLA's constant folding evaluates when every operand is a constant (no side effects, no
#: randomness, no calls out of the module)
FOLDABLE = frozenset({
    "abs", "add", "and", "bitcast", "bitcast-convert", "broadcast", "clamp", "compare",
    "concatenate", "convert", "copy", "divide", "dot", "dynamic-slice", "exponential",
    "gather", "log", "maximum", "minimum", "multiply", "negate", "not", "or", "pad", "power",
    "reduce", "remainder", "reshape", "reverse", "rsqrt", "select", "shift-left",
    "shift-right-arithmetic", "shift-right-logical", "sign", "slice", "sqrt", "subtract",
    "transpose", "xor",
})


class ConstantValues:
    """Which values are constants, iotas, or computed by foldable ops from those alone, i.e.
    what XLA's constant folding computes at compile time. Answers are remembered (the ops
    asked about are kept alive, so a new op never takes a remembered one's id) until
    ``forget``: they hold while the module is unchanged."""

    def __init__(self) -> None:
        self._memo: dict[int, bool] = {}
        self._all_of: dict[int, bool] = {}
        self._alive: list[Operation] = []

    def __call__(self, v: Value) -> bool:
        op = v.owner if isinstance(v.owner, Operation) else None
        if op is None:
            return False  # a parameter of a computation (a block argument)
        stack = [op]
        while stack:  # post-order over the producers, without recursion (deep modules)
            o = stack[-1]
            if id(o) in self._memo:
                stack.pop()
                continue
            if o.opcode in ("constant", "iota"):
                self._remember(o, True)
                continue
            owners = [x.owner for x in o.operands]
            if (o.opcode not in FOLDABLE or not owners
                    or not all(isinstance(p, Operation) for p in owners)):
                self._remember(o, False)
                continue
            pending = [p for p in owners if id(p) not in self._memo]
            if pending:
                stack.extend(pending)
                continue
            self._remember(o, all(self._memo[id(p)] for p in owners))
        return self._memo[id(op)]

    def _remember(self, op: Operation, value: bool) -> None:
        self._memo[id(op)] = value
        self._alive.append(op)

    def forget(self) -> None:
        """Drop every answer (the module was edited)."""
        self._memo.clear()
        self._all_of.clear()
        self._alive.clear()

    def all_of(self, op: Operation) -> bool:
        """Are all of ``op``'s operands such values (XLA folds ``op`` itself, if foldable)?"""
        known = self._all_of.get(id(op))
        if known is None:
            known = self._all_of[id(op)] = bool(op.operands) and all(
                self(v) for v in op.operands)
            self._alive.append(op)
        return known


def folded_by_xla(c: Cluster) -> str | None:
    """Why XLA:CPU computes ``c`` at compile time (every input constant), or None."""
    constant = ConstantValues()
    if c.inputs and all(constant(v) for v in c.inputs):
        return ("every input of the cluster is a constant or computed from constants only "
                "(e.g. a table and ids captured from Python as numpy arrays): XLA:CPU computes "
                "it at compile time, with its constant folding's own order of adds, at no run "
                "time cost, so the cluster stays in XLA")
    return None
