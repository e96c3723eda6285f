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

The same reading covers the roundings after a bag, bags of any size: a value computed from a
bag and converted to a narrower float type (``pooled.astype(bf16) @ w``, a bf16 or f16 head
of an f32 bag) is, with ``xla_allow_excess_precision`` on, rounded or not depending on where
XLA:CPU puts the convert: its simplifier drops an ``f32 -> bf16 -> f32`` pair it sees whole, a
YNNPACK fusion computing the pair keeps the f32 value, a loop fusion rounds. Rewriting the bag
moves these decisions (measured: other bits where the pair left the bag's YNNPACK fusion for
XLA's loop, ``pooled.astype(bf16) @ w`` at [256,20,64]), so each such convert
(``roundings_after``) must be computed the same way (``rounding_status``) in the trial rewrite
as in the original, or its bag stays in XLA.
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
#: the bags kept in XLA for the roundings after them, with why (``deciding``)
_ROUNDED: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "ynn_roundings", default=None)
#: no verdict: the bag is not inside a YNNPACK fusion of the optimized module (or none was read)
UNKNOWN = "unknown"


@dataclasses.dataclass
class _Instr:
    name: str
    opcode: str
    operands: list[str]
    op_name: str | None
    dtype: str = ""             # the result's element type ("" for a tuple)
    root: bool = False
    calls: str | None = None    # a fusion's computation
    param: int | None = None    # a parameter's number


_INSTR = re.compile(r"^\s*(ROOT\s+)?%([\w.\-]+)\s*=\s*(\([^=]*?\)|\S+)\s+([\w\-]+)\((.*)$")
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
            calls = _CALLS.search(line)
            shape = m.group(3)
            current.append(_Instr(
                m.group(2), m.group(4), _operands(m.group(5)),
                name_meta.group(1) if name_meta else None,
                dtype="" if shape.startswith("(") else shape.split("[")[0],
                root=bool(m.group(1)), calls=calls.group(1) if calls else None,
                param=int(m.group(5).split(")")[0]) if m.group(4) == "parameter" else None))
    return out


def _ynn_names(text: str) -> list[str]:
    """The names of the computations XLA:CPU gives to YNNPACK."""
    return [c.group(1) for line in text.splitlines()
            if "__ynn_fusion" in line and " fusion(" in line and (c := _CALLS.search(line))]


def ynn_fusion_bodies(text: str, comps: dict[str, list[_Instr]] | None = None
                      ) -> list[list[_Instr]]:
    """The computations XLA:CPU gives to YNNPACK (fusions of kind ``__ynn_fusion``);
    ``comps``: ``computations(text)`` when already parsed."""
    comps = computations(text) if comps is None else comps
    return [comps.get(n, []) for n in _ynn_names(text)]


def rounding_status(text: str, names: dict[str, str], converts: set[str],
                    comps: dict[str, list[_Instr]] | None = None
                    ) -> dict[str, frozenset[str]]:
    """How the optimized module ``text`` computes each convert of ``converts`` (module op
    names; ``names``: tag -> op name): "rounded" (XLA's code rounds), "kept wide by YNNPACK"
    (a YNNPACK fusion converts it back in the same fusion) or, with no instruction left,
    "dropped" (XLA removed the round trip). ``comps``: ``computations(text)`` when already
    parsed."""
    comps = computations(text) if comps is None else comps
    ynn = set(_ynn_names(text))
    out: dict[str, set[str]] = {}
    for comp, body in comps.items():
        users = _users(body) if comp in ynn else {}
        for i in body:
            name = names.get(i.op_name or "")
            if i.opcode != "convert" or name not in converts:
                continue
            wide = [u for u in users.get(i.name, []) if u.opcode == "convert"]
            if wide and all(_rounded_again(comps, ynn, comp, u, i.dtype) for u in wide):
                wide = []  # every use of the wide value rounds it to i's type first
            out.setdefault(name, set()).add("kept wide by YNNPACK" if wide else "rounded")
    return {n: frozenset(out.get(n, {"dropped"})) for n in converts}


#: ops that only move values (a value leaves them with its bits)
_MOVES = frozenset({"bitcast", "reshape", "copy", "transpose", "slice", "concatenate",
                    "broadcast"})


def _rounded_again(comps: dict[str, list[_Instr]], ynn: set[str], comp: str, wide: _Instr,
                   dtype: str) -> bool:
    """Is the f32 value ``wide`` (YNNPACK's fusion ``comp`` converts a value to ``dtype`` and
    back, keeping it unrounded) rounded to ``dtype`` before anything but moves reads it? It
    must leave the fusion as its root, and every user of the fusion, outside YNNPACK, move it
    into a convert to ``dtype``: round(round(x)) = round(x), so the value read is the one a
    rounding convert right after the bag would give (double rounding to one type is exact)."""
    body = comps.get(comp, [])
    if not _ends_in(body, wide, lambda i: i.root and (i is wide or i.opcode in _MOVES)):
        return False
    fusions = [(c, i) for c, b in comps.items() for i in b if i.calls == comp]
    if not fusions:
        return False
    for parent, fusion in fusions:
        for user in (u for u in comps[parent] if fusion.name in u.operands):
            if user.opcode == "convert" and user.dtype == dtype:
                continue
            if user.opcode != "fusion" or user.calls in ynn or user.calls is None:
                return False
            inner = comps.get(user.calls, [])
            at = {k for k, o in enumerate(user.operands) if o == fusion.name}
            params = [i for i in inner if i.opcode == "parameter" and i.param in at]
            if len(params) != len(at) or not all(_ends_in(
                    inner, q, lambda i: i.opcode == "convert" and i.dtype == dtype)
                    for q in params):
                return False
    return True


def _ends_in(body: list[_Instr], start: _Instr, end) -> bool:
    """Does every path of users from ``start`` within ``body`` pass only through moves until an
    instruction ``end`` accepts (``start`` itself included)?"""
    users = _users(body)
    todo, seen = [start], set()
    while todo:
        i = todo.pop()
        if end(i):
            continue
        if i is not start and i.opcode not in _MOVES:
            return False
        if i.name in seen:
            continue
        seen.add(i.name)
        nxt = users.get(i.name, [])
        if not nxt:  # the value leaves unrounded
            return False
        todo.extend(nxt)
    return True


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


#: bits of the float types a convert can round to
_FLOAT_BITS = {"f64": 64, "f32": 32, "bf16": 16, "f16": 16}
#: how many ops after a bag the search for its roundings follows
ROUNDING_DEPTH = 8


def _float_bits(t: str) -> int | None:
    if t in _FLOAT_BITS:
        return _FLOAT_BITS[t]
    return int(t[1]) if t[:2] in ("f8", "f6", "f4") else None


def rounds(op: Operation) -> bool:
    """A convert from a float type to one that cannot hold all its values (narrower, or as
    wide and other: bf16 <-> f16)."""
    if op.opcode != "convert" or not op.result.type.is_array or not op.operands:
        return False
    a, b = op.operands[0].type.element_type, op.result.type.element_type
    wa, wb = _float_bits(a), _float_bits(b)
    return wa is not None and wb is not None and (wb < wa or (wb == wa and a != b))


def roundings_after(root: Operation) -> list[str]:
    """The rounding converts (``rounds``) among the ops computed from ``root``'s value, up to
    ROUNDING_DEPTH ops after it."""
    out: list[str] = []
    frontier, seen = [root], {id(root)}
    for _ in range(ROUNDING_DEPTH):
        nxt: list[Operation] = []
        for op in frontier:
            for u in op.users:
                if id(u) not in seen:
                    seen.add(id(u))
                    if rounds(u):
                        out.append(u.name)
                    nxt.append(u)
        frontier = nxt
    return out


def rounding_candidates(module: Module) -> dict[str, list[str]]:
    """The float reduces and scatters (what bag clusters end in) with roundings after them."""
    out = {}
    for g in module.graphs:
        for op in g.ops:
            if (op.opcode in ("reduce", "scatter") and len(op.results) == 1
                    and op.result.type.is_array
                    and op.result.type.element_type in _FLOAT_BITS
                    and (after := roundings_after(op))):
                out[op.name] = after
    return out


@dataclasses.dataclass
class Fusions:
    """XLA:CPU's YNNPACK fusions of one module, by the module's op names: ``inexact``, each op
    some YNNPACK fusion computes in other bits than XLA's loop would, with its kind
    ("approximated" or "rounded product"); ``bags``, each candidate reduce inside a YNNPACK
    fusion with the inexact ops of that fusion (None for one XLA made, which has no name)."""

    inexact: dict[str, str] = dataclasses.field(default_factory=dict)
    bags: dict[str, list[str | None]] = dataclasses.field(default_factory=dict)
    #: each bag root with the rounding converts after it (``rounding_candidates``)
    roundings: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    #: each rounding convert of the module: how the optimized module computes it
    rounding_status: dict[str, frozenset[str]] = dataclasses.field(default_factory=dict)

    def needs_trial(self) -> bool:
        """Does some bag's fusion compute an inexact op, or a rounding follow some bag (a
        rewrite may move either)?"""
        return any(self.bags.values()) or bool(self.roundings)


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
    roundings = {} if rewritten else rounding_candidates(module)
    if not rewritten and ((not bag_names and not roundings) or not any(
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
    out = Fusions(roundings=roundings)
    converts = {op.name for g in module.graphs for op in g.ops if rounds(op)}
    comps = computations(text)  # parsed once for both readings
    out.rounding_status = rounding_status(text, names, converts, comps)
    for body in ynn_fusion_bodies(text, comps):
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
    status = rewritten.rounding_status if rewritten is not None else {}
    for bag, converts in original.roundings.items():
        for n in converts:
            if bag in out or n not in present:  # a convert the cluster computes itself
                continue
            was = original.rounding_status.get(n, frozenset({"dropped"}))
            now = status.get(n)
            if now != was:
                how = " or ".join(sorted(now)) if now else "cannot be read"
                out[bag] = (f"{bag}'s value is rounded by {n}, which XLA:CPU's optimized "
                            f"module computes as {' or '.join(sorted(was))} and the "
                            f"rewritten one as {how} (xla_allow_excess_precision lets XLA "
                            "keep f32 values where it sees fit): other bits, so the cluster "
                            "stays in XLA")
    return out


@contextlib.contextmanager
def deciding(original: Fusions | None, kept: dict[str, str]) -> Iterator[None]:
    """Within: ``verdict`` answers for the bags ``original`` shows in YNNPACK fusions: the
    reason in ``kept``, else None (rewritten)."""
    known: dict[str, str | None] = {}
    rounded: dict[str, str] = {}
    if original is not None:
        known = {b: kept.get(b) for b in original.bags}
        rounded = {b: kept[b] for b in original.roundings if b in kept}
    token, token_r = _CURRENT.set(known), _ROUNDED.set(rounded)
    try:
        yield
    finally:
        _CURRENT.reset(token)
        _ROUNDED.reset(token_r)


def rounding_refusal(root: Operation) -> str | None:
    """Why the cluster ending in ``root`` stays in XLA for a rounding after it that the
    rewrite would have XLA compute otherwise (``changed``), or None."""
    return (_ROUNDED.get() or {}).get(root.name)


def verdict(op: Operation) -> str | None:
    """Why the bag reduce ``op`` stays in XLA for what its YNNPACK fusion computes (None: it
    may be rewritten), or UNKNOWN when no fusion was read for ``op``."""
    known = _CURRENT.get()
    if known is None or op.name not in known:
        return UNKNOWN
    return known[op.name]
