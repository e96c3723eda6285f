"""Hand-built SLC functions (the O0 shape of Ember's eb_slc_O0.mlir) that the SLCV dialect and
pass tests start from, with numpy references: an offsets embedding bag (sum / max, optionally
weighted) and a plain row copy. Ids are i32 or i64 and always in range (the lowering's index
modes are tested with the lowering)."""

from __future__ import annotations

import numpy as np

import ember_xla.dae_target.dialects  # noqa: F401  (registers the dialects)
from ember_xla.dae_target.dialects import arith, memref, scf, slc
from ember_xla.dae_target.dialects.func import ReturnOp
from ember_xla.ir.block import Block
from ember_xla.ir.graph import Graph, Module
from ember_xla.ir.operation import Operation
from ember_xla.ir.types import F32, INDEX, IntegerType, MemRefType
from ember_xla.ir.value import Value


class B:
    """Appends ops to a block: ``b(Cls, operands, result_types, **attrs)`` -> the op."""

    def __init__(self, block: Block) -> None:
        self.block = block

    def __call__(self, cls: type, operands: list[Value], types: list = (), **attrs) -> Operation:
        return self.block.append(cls.create(operands, list(types), attrs))

    def v(self, cls: type, operands: list[Value], t, **attrs) -> Value:
        return self(cls, operands, [t], **attrs).result

    def const(self, value, t=INDEX) -> Value:
        return self.v(arith.ConstantOp, [], t, value=value)

    def stream(self, v: Value) -> Value:
        return self.v(slc.ToStreamOp, [v], slc.StreamType.of(v.type))

    def from_stream(self, s: Value) -> Value:
        return self.v(slc.FromStreamOp, [s], s.type.elem)

    def loop(self, lb: Value, ub: Value, step: Value, name: str) -> tuple[slc.ForOp, B]:
        op = self.block.append(slc.ForOp.build(lb, ub, step, iv_name=name))
        return op, B(op.body)

    def callback(self) -> tuple[slc.CallbackOp, B]:
        op = self.block.append(slc.CallbackOp.build())
        return op, B(op.body)


def embedding_bag(combiner: str = "sum", weighted: bool = False, id_bits: int = 32,
                  dtype=F32, clamp: bool = False, shifted: bool = False) -> Module:
    """out[b, :] = combine_{j in [off[b], off[b+1])} w[j] * table[ids[j], :] (init 0 / -inf);
    one callback per element (O0). ``clamp``: the row index is clamped into the table (the
    lowering's clip mode), which dedup requires. ``shifted``: the row stream reads column
    ``k + 0`` through an alu stream (a computed sequential index)."""
    m = Module("bag")
    ids_t = MemRefType((None,), IntegerType(id_bits))
    args = [MemRefType((None,), INDEX), ids_t, MemRefType((None, None), dtype)]
    if weighted:
        args.append(MemRefType((None,), dtype))
    args.append(MemRefType((None, None), dtype))
    g = m.add(Graph("bag", arg_types=args), entry=True)
    off, ids, table = g.args[:3]
    w = g.args[3] if weighted else None
    out = g.args[-1]
    g.attributes["num_inputs"] = len(args) - 1
    b = B(g)
    c0, c1 = b.const(0), b.const(1)
    nb = b.v(arith.SubIOp, [b.v(memref.DimOp, [off], INDEX, dim=0), c1], INDEX)
    d = b.v(memref.DimOp, [table], INDEX, dim=1)
    s0, s1, sb, sd = b.stream(c0), b.stream(c1), b.stream(nb), b.stream(d)
    sn = b.stream(b.v(memref.DimOp, [table], INDEX, dim=0)) if clamp else None
    _, bag = b.loop(s0, sb, s1, "b")
    bag_iv = bag.block.args[0]
    _, init = bag.callback()
    bi = init.from_stream(bag_iv)
    zfor = init.block.append(scf.ForOp.build(c0, d, c1))
    zb = B(zfor.body)
    init_v = 0.0 if combiner == "sum" else float("-inf")
    zb(memref.StoreOp, [zb.const(init_v, dtype), out, bi, zfor.body.args[0]])
    zb(scf.YieldOp, [])
    init(slc.YieldOp, [])
    start = bag.v(slc.MemStreamOp, [off, bag_iv], slc.INDEX_STREAM)
    nxt = bag.v(slc.AluStreamOp, [bag_iv, s1], slc.INDEX_STREAM, op="add")
    end = bag.v(slc.MemStreamOp, [off, nxt], slc.INDEX_STREAM)
    _, lk = bag.loop(start, end, s1, "j")
    j = lk.block.args[0]
    i = lk.v(slc.MemStreamOp, [ids, j], slc.StreamType.of(ids_t.elem))
    if clamp:
        i = lk.v(slc.AluStreamOp, [i, sn], i.type, op="clamp")
    ws = lk.v(slc.MemStreamOp, [w, j], slc.StreamType.of(dtype)) if weighted else None
    _, row = lk.loop(s0, sd, s1, "k")
    k = row.block.args[0]
    col = row.v(slc.AluStreamOp, [k, s0], slc.INDEX_STREAM, op="add") if shifted else k
    v = row.v(slc.MemStreamOp, [table, i, col], slc.StreamType.of(dtype))
    _, cb = row.callback()
    bb, kk, vv = cb.from_stream(bag_iv), cb.from_stream(k), cb.from_stream(v)
    if weighted:
        vv = cb.v(arith.MulFOp, [vv, cb.from_stream(ws)], dtype)
    o = cb.v(memref.LoadOp, [out, bb, kk], dtype)
    r = cb.v(arith.AddFOp if combiner == "sum" else arith.MaxFOp, [o, vv], dtype)
    cb(memref.StoreOp, [r, out, bb, kk])
    cb(slc.YieldOp, [])
    for blk in (row, lk, bag):
        blk(slc.YieldOp, [])
    b(ReturnOp, [])
    return m


def bag_inputs(rng: np.random.Generator, lengths: list[int], rows: int, dim: int,
               id_bits: int = 32, weighted: bool = False, dtype=np.float32,
               dup: bool = False) -> list[np.ndarray]:
    off = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    n = int(off[-1])
    hi = max(1, rows // 3) if dup else rows
    ids = rng.integers(0, hi, size=n).astype(f"int{id_bits}")
    table = rng.standard_normal((rows, dim)).astype(dtype)
    out = [off, ids, table]
    if weighted:
        out.append(rng.standard_normal(n).astype(dtype))
    return out


def bag_reference(inputs: list[np.ndarray], combiner: str = "sum") -> np.ndarray:
    off, ids, table = inputs[:3]
    w = inputs[3] if len(inputs) > 3 else None
    dt = table.dtype
    out = np.full((len(off) - 1, table.shape[1]), 0 if combiner == "sum" else -np.inf, dt)
    for b in range(len(off) - 1):
        for j in range(off[b], off[b + 1]):
            v = table[ids[j]] if w is None else (table[ids[j]] * w[j]).astype(dt)
            out[b] = (out[b] + v).astype(dt) if combiner == "sum" else np.maximum(out[b], v)
    return out


def run_bag(module: Module, inputs: list[np.ndarray]) -> tuple[np.ndarray, dict[str, int]]:
    """Run a bag function (any level); returns (out, counters)."""
    from ember_xla.dae_target.interp.run import run_counted

    shape = [len(inputs[0]) - 1, inputs[2].shape[1]]
    module.entry.attributes["output_shapes"] = [shape]
    import collections

    (out,), counts = run_counted(module, inputs)
    return out, collections.Counter(counts)


def _normalized(text: str) -> list[str]:
    """Lines with SSA numbers blanked (``%12`` -> ``%_``, ``%11#2`` -> ``%_#2``), so that a
    renumbering after an edit is not a difference."""
    import re

    return [re.sub(r"%\d+", "%_", line) for line in text.splitlines()]


def hunks(before: str, after: str) -> list[tuple[list[str], list[str]]]:
    """The changed hunks between two printed modules: (removed lines, added lines), stripped
    of indentation and SSA numbers."""
    import difflib

    a, b = _normalized(before), _normalized(after)
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            out.append(([x.strip() for x in a[i1:i2]], [x.strip() for x in b[j1:j2]]))
    return out


def diff_text(before: str, after: str) -> str:
    """``hunks`` rendered as text: ``---`` between hunks, ``-``/``+`` per line."""
    out = []
    for removed, added in hunks(before, after):
        out.append("---")
        out += ["- " + x for x in removed] + ["+ " + x for x in added]
    return "\n".join(out) + "\n"


def apply_printed(module: Module, pipeline: str) -> tuple[str, str, list]:
    """(text before, text after, reports) of running ``pipeline`` on ``module`` (verified)."""
    from ember_xla.dae_target import passes  # noqa: F401  (registers the passes)
    from ember_xla.ir.passes import parse_pipeline
    from ember_xla.ir.printer import print_module
    from ember_xla.ir.verify import verify_generic_module

    before = print_module(module)
    reports = [p.apply(module) for p in parse_pipeline(pipeline)]
    verify_generic_module(module)
    return before, print_module(module), reports


def check_golden(name: str, text: str) -> None:
    """``text`` must equal ``golden/<name>`` beside this file (``EMBER_UPDATE_GOLDEN=1``
    rewrites the file instead; review the diff before committing it)."""
    import os
    from pathlib import Path

    path = Path(__file__).with_name("golden") / name
    if os.environ.get("EMBER_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.read_text() == text, f"golden/{name} differs:\n{text}"
