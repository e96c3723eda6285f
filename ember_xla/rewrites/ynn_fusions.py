"""What XLA:CPU's YNNPACK fusions compute around each bag, read off XLA's own optimized
module rather than modelled.

From YNN_MIN_ELEMENTS values on, XLA:CPU gives a bag's ``reduce`` to a YNNPACK fusion that may
take in ops around it: the dense layer reading the pooled rows and its activation, the ops
computing per-lookup weights. YNNPACK computes tanh, exp, logistic, erf ... with its own
approximations and rounds a product before adding it, where XLA's loop contracts the two into
a fused multiply-add. Once the bag is a custom call those ops may land elsewhere: in XLA's
loop (``sigmoid(pooled @ w)``: the dot is a YNNPACK fusion alone) or in a YNNPACK fusion of
their own (``softmax(pooled @ w + b)``, ``tanh(pooled).sum(-1)``), and only in the first case
do they give other bits. ``reduce_merge.computed_by_ynnpack`` models which ops XLA takes in;
its growth rules are XLA's and not all modelled. Here both sides are read instead:

1. ``read(original)``: the module is compiled once with every op tagged (its
   ``metadata.op_name``, which XLA keeps on fused copies); each YNNPACK fusion holding a
   candidate bag reduce gives the inexact ops it computes (an approximated op, an add or
   subtract of a product), by name.
2. A trial rewrite of a copy is compiled and read the same way (``changed``): a bag is kept in
   XLA when an inexact op of its fusion is no longer computed the same way (by YNNPACK, as the
   same kind) in the rewritten module, and the trial is repeated without it.
A bag that the optimized original does not show inside a YNNPACK fusion is left to the model.
An op XLA made without a tag counts as the nearest tagged op it feeds (the parts of an expanded
``logistic``); one feeding none keeps its bag in XLA."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
import re
from collections.abc import Iterator

from ember_xla.ir.graph import Module
from ember_xla.ir.operation import Operation
from ember_xla.native.padded_order import OrderNotReproduced, ynn_reduces

log = logging.getLogger(__name__)

#: the op_name each op of a compiled copy is tagged with (+ its index)
TAG = "ember_ynn_probe_"
#: elementwise ops whose result is the correctly rounded (or exact) value of their operands,
#: so the same bits whoever computes them: XLA's loop or YNNPACK's kernels
EXACT_ELEMENTWISE = frozenset({
    "add", "subtract", "multiply", "divide", "sqrt", "maximum", "minimum", "negate", "abs",
    "select", "compare", "convert", "clamp", "sign", "floor", "ceil", "round-nearest-afz",
    "round-nearest-even", "is-finite", "and", "or", "not", "xor",
})
#: ... with the ops that move or select values; a dot sums its products in its own order either
#: way and a reduce in the fusion is the bag's own (measured, docs/RELIABILITY.md)
EXACT = EXACT_ELEMENTWISE | {
    "parameter", "constant", "iota", "bitcast", "reshape", "transpose", "copy", "broadcast",
    "slice", "concatenate", "pad", "reverse", "dynamic-slice", "gather", "tuple",
    "get-tuple-element", "dot", "reduce",
}
_CARRY = ("convert", "bitcast", "copy", "reshape", "transpose")

#: the verdicts of the rewrite under way (``deciding``); None outside one
_CURRENT: contextvars.ContextVar[dict[str, str | None] | None] = contextvars.ContextVar(
    "ynn_fusions", default=None)
#: no verdict: the bag is not inside a YNNPACK fusion of the optimized module (or none was read)
UNKNOWN = "unknown"


@dataclasses.dataclass
class _Instr:
    name: str
    opcode: str
    operands: list[str]
    op_name: str | None


_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%([\w.\-]+)\s*=\s*(\([^=]*?\)|\S+)\s+([\w\-]+)\((.*)$")
_HEAD = re.compile(r"^(?:ENTRY\s+)?%([\w.\-]+)\s*\(.*\{\s*$")
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_CALLS = re.compile(r"calls=%([\w.\-]+)")


def _operands(rest: str) -> list[str]:
    """The operand names at the start of ``rest`` (the text after ``opcode(``)."""
    depth, end = 1, len(rest)
    for i, ch in enumerate(rest):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            end = i
            break
    return re.findall(r"%([\w.\-]+)", rest[:end])


def computations(text: str) -> dict[str, list[_Instr]]:
    """The optimized module's computations, each as its instructions in order."""
    out: dict[str, list[_Instr]] = {}
    current: list[_Instr] | None = None
    for line in text.splitlines():
        head = _HEAD.match(line)
        if head:
            current = out.setdefault(head.group(1), [])
            continue
        m = _INSTR.match(line)
        if m and current is not None:
            name_meta = _OP_NAME.search(line)
            current.append(_Instr(m.group(1), m.group(3), _operands(m.group(4)),
                                  name_meta.group(1) if name_meta else None))
    return out


def ynn_fusion_bodies(text: str) -> list[list[_Instr]]:
    """The computations XLA:CPU gives to YNNPACK (fusions of kind ``__ynn_fusion``)."""
    comps = computations(text)
    bodies = []
    for line in text.splitlines():
        if "__ynn_fusion" in line and " fusion(" in line and (c := _CALLS.search(line)):
            bodies.append(comps.get(c.group(1), []))
    return bodies


def candidates(module: Module) -> list[Operation]:
    """The f32 reduces XLA:CPU gives to YNNPACK (from YNN_MIN_ELEMENTS operand values on)."""
    out = []
    for g in module.graphs:
        for op in g.ops:
            if (op.opcode == "reduce" and len(op.operands) == 2
                    and op.operands[0].type.is_array
                    and op.operands[0].type.element_type == "f32"):
                try:
                    if ynn_reduces(op.operands[0].type.size):
                        out.append(op)
                except OrderNotReproduced:
                    return []  # an unmodelled YNNPACK setting: the bags stay in XLA anyway
    return out


@dataclasses.dataclass
class Fusions:
    """XLA:CPU's YNNPACK fusions of one module, by the module's op names: ``inexact``, each op
    some YNNPACK fusion computes in other bits than XLA's loop would, with its kind
    ("approximated" or "rounded product"); ``bags``, each candidate reduce inside a YNNPACK
    fusion with the inexact ops of that fusion (None for one XLA made, which has no name)."""

    inexact: dict[str, str] = dataclasses.field(default_factory=dict)
    bags: dict[str, list[str | None]] = dataclasses.field(default_factory=dict)

    def needs_trial(self) -> bool:
        """Does some bag's fusion compute an inexact op (a rewrite may move it)?"""
        return any(self.bags.values())


def _kinds(body: list[_Instr]) -> list[tuple[_Instr, str]]:
    """The inexact instructions of a YNNPACK fusion, with their kind."""
    by_name = {i.name: i for i in body}

    def product(name: str) -> bool:
        i = by_name.get(name)
        while i is not None and i.opcode in _CARRY and i.operands:
            i = by_name.get(i.operands[0])
        return i is not None and i.opcode == "multiply"

    out = []
    for i in body:
        if i.opcode not in EXACT:
            out.append((i, "approximated"))
        elif i.opcode in ("add", "subtract") and any(product(o) for o in i.operands):
            out.append((i, "rounded product"))
    return out


def _users(body: list[_Instr]) -> dict[str, list[_Instr]]:
    """Each instruction's users within the fusion, by its name."""
    users: dict[str, list[_Instr]] = {}
    for i in body:
        for o in i.operands:
            users.setdefault(o, []).append(i)
    return users


def _source(instr: _Instr, users: dict[str, list[_Instr]], names: dict[str, str]
            ) -> str | None:
    """The module op ``instr`` computes (part of): its tag's, else that of the nearest tagged
    user in the fusion (``users``: XLA expands ``logistic`` into negate, exp, add and divide,
    and only the last keeps the op's metadata), else None."""
    todo, seen = [instr], set()
    while todo:
        i = todo.pop(0)
        if i.op_name in names:
            return names[i.op_name]
        if i.name not in seen:
            seen.add(i.name)
            todo.extend(users.get(i.name, []))
    return None


def read(module: Module, options: dict[str, bool | int | str] | None = None,
         rewritten: bool = False) -> Fusions | None:
    """``module``'s YNNPACK fusions as XLA:CPU compiles it (a tagged copy), or None when it
    does not compile alone or (unless ``rewritten``: a trial rewrite) has no candidate bag."""
    bag_names = {op.name for op in candidates(module)}  # a copy keeps the names
    if not rewritten and (not bag_names or not any(
            op.opcode == "gather" for g in module.graphs for op in g.ops)):
        return None
    from ember_xla.runtime.execute import clone_module, compile_module

    tagged = clone_module(module)
    names: dict[str, str] = {}
    for g in tagged.graphs:
        for op in g.ops:
            tag = f"{TAG}{len(names)}"
            op.attributes["metadata"] = {**(op.attributes.get("metadata") or {}),
                                         "op_name": tag}
            names[tag] = op.name
    try:
        text = compile_module(tagged, options, cache=False).optimized_hlo()
    except Exception as e:  # the model decides where XLA cannot compile the module alone
        log.info("ynn_fusions: the module did not compile alone (%s); modelled instead", e)
        return None
    out = Fusions()
    for body in ynn_fusion_bodies(text):
        users = _users(body)
        inexact = [(_source(i, users, names), kind) for i, kind in _kinds(body)]
        for name, kind in inexact:
            if name is not None:
                out.inexact[name] = kind
        for i in body:
            name = names.get(i.op_name or "")
            if i.opcode == "reduce" and name in bag_names:
                out.bags.setdefault(name, []).extend(n for n, _ in inexact)
    return out


def changed(original: Fusions, rewritten: Fusions | None, present: set[str]
            ) -> dict[str, str]:
    """The bags of ``original`` some inexact op of whose YNNPACK fusion the rewritten module
    (its op names: ``present``; its fusions: ``rewritten``) computes otherwise, each with
    why it stays in XLA."""
    out = {}
    after = rewritten.inexact if rewritten is not None else {}
    for bag, ops in original.bags.items():
        for n in ops:
            if n is None:
                why = "an op XLA made inside it, which cannot be followed"
            elif n not in present:
                why = f"{n}, which the rewritten module no longer has"
            elif after.get(n) != original.inexact[n]:
                why = (f"{n} ({original.inexact[n]}), which the rewritten module computes "
                       "outside YNNPACK")
            else:
                continue
            out[bag] = (f"reduce {bag} is one YNNPACK fusion with the ops around it in "
                        f"XLA:CPU's optimized module, among them {why}: other bits, so the "
                        "cluster stays in XLA")
            break
    return out


@contextlib.contextmanager
def deciding(original: Fusions | None, kept: dict[str, str]) -> Iterator[None]:
    """Within: ``verdict`` answers for the bags ``original`` shows in YNNPACK fusions: the
    reason in ``kept``, else None (rewritten)."""
    known: dict[str, str | None] = {}
    if original is not None:
        known = {b: kept.get(b) for b in original.bags}
    token = _CURRENT.set(known)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def verdict(op: Operation) -> str | None:
    """Why the bag reduce ``op`` stays in XLA for what its YNNPACK fusion computes (None: it
    may be rewritten), or UNKNOWN when no fusion was read for ``op``."""
    known = _CURRENT.get()
    if known is None or op.name not in known:
        return UNKNOWN
    return known[op.name]
