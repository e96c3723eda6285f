"""The access engine of the reference emulator (``reference.py``): one ``run`` of an engine
as a generator of control tokens (docs/DAE_PROGRAM.md, "Execution"). It evaluates the streams
(semantics of ``interp/slc.py`` / ``interp/slcv.py``), pushes data-queue entries, and records
the trace events (loads with address, dependency, layer and queued flag; pushes; tokens) in
program order."""

from __future__ import annotations

import collections
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from ember_xla.dae.model import Engine, scalar_type
from ember_xla.dae.numerics import alu
from ember_xla.dae.values import element_index, of_type, scalar
from ember_xla.ir.interpreter import InterpretError
from ember_xla.ir.types import VectorType, numpy_dtype

if TYPE_CHECKING:
    from ember_xla.emulator.reference import Machine


def nbytes(v: Any) -> int:
    """Size of one data-queue entry (as the DLC interpreter counts it)."""
    return int(v.nbytes) if isinstance(v, np.ndarray) else int(np.asarray(v).itemsize)


def _lanes(x: Any, vl: int) -> np.ndarray:
    a = np.asarray(x, dtype=np.int64)
    return np.broadcast_to(a, (vl,)) if a.ndim == 0 else a


class Access:
    """One run of engine ``e``: ``tokens()`` yields case ids; ``queue`` receives the entries."""

    def __init__(self, m: Machine, e: Engine, callback_numbers: dict[int, int],
                 queue: collections.deque) -> None:
        self.m, self.e, self.cb, self.queue = m, e, callback_numbers, queue
        self.trace = m.trace
        n = len(e.streams)
        self.vals: list[Any] = [None] * n
        self.src = [-1] * n           # latest load event each stream's value derives from
        self.owned: dict[int, list[int]] = collections.defaultdict(list)
        for s, st in enumerate(e.streams):
            self.owned[st.owner].append(s)
        self.children: dict[int, list[int]] = collections.defaultdict(list)
        for t, u in enumerate(e.tus):
            self.children[u.parent].append(t)
        self.at: dict[tuple[int, str], list] = collections.defaultdict(list)
        for r in e.registrations:
            self.at[(r.tu, r.event)].append(r)
        self.queued = {r.value for r in e.registrations if r.what != "token"}
        self.depth = [e.depth(t) for t in range(len(e.tus))]
        self.tu_src = [-1] * len(e.tus)

    def tokens(self) -> Iterator[int]:
        for s in self.owned[-1]:
            self.eval(s, 0)
        for t in self.children[-1]:
            yield from self.start(t)

    # -- traversal units --------------------------------------------------------------------
    def start(self, t: int) -> Iterator[int]:
        u = self.e.tus[t]
        lb, ub, st = (int(self.vals[x]) for x in (u.lb, u.ub, u.step))
        if st <= 0:
            raise InterpretError(f"tu {t}: step must be positive, got {st}")
        self.tu_src[t] = max(self.src[u.lb], self.src[u.ub], self.src[u.step])
        buffers = {r.value: np.zeros(max(ub, 0), numpy_dtype(scalar_type(
            self.e.streams[r.value].dtype))) for r in self.at[(t, "end")] if r.what == "buffer"}
        yield from self.fire(t, "begin", buffers)
        vl = u.vl
        lanes = np.arange(vl, dtype=np.int64) * st if vl else None
        for base in range(lb, ub, st * vl if vl else st):
            iv = np.int64(base) if lanes is None else base + lanes
            for s in self.owned[t]:
                kind = self.e.streams[s].kind
                if kind == "ind":
                    self.vals[s], self.src[s] = iv, self.tu_src[t]
                elif kind == "mask":
                    self.vals[s], self.src[s] = iv < ub, self.tu_src[t]
                else:
                    self.eval(s, self.depth[t])
            for s, buf in buffers.items():
                active = np.flatnonzero(iv < ub)
                if len(active):
                    pos = iv[active]
                    for p in (pos.min(), pos.max()):
                        element_index(buf, (p,), "row buffer")
                    buf[pos] = self.vals[s][active]
            for c in self.children[t]:
                yield from self.start(c)
            yield from self.fire(t, "iter", buffers)
        yield from self.fire(t, "end", buffers)

    def fire(self, t: int, event: str, buffers: dict[int, np.ndarray]) -> Iterator[int]:
        for r in self.at[(t, event)]:
            if r.what == "token":
                self.trace.token(self.cb[r.value])
                yield r.value
                continue
            v = buffers[r.value] if r.what == "buffer" else self.vals[r.value]
            if r.what == "push" and isinstance(v, np.ndarray):
                v = v.copy()
            self.queue.append(v)
            self.trace.push(nbytes(v))

    # -- streams ----------------------------------------------------------------------------
    def eval(self, s: int, layer: int) -> None:
        st = self.e.streams[s]
        ops = [self.vals[x] for x in st.src]
        dep = max((self.src[x] for x in st.src), default=-1)
        self.src[s] = dep
        if st.kind == "reg":
            self.vals[s] = self.m.val[int(st.imm[0])]
        elif st.kind == "alu":
            b = int(ops[1]) if len(ops) > 1 else None
            self.vals[s] = scalar(alu(str(st.imm[0]), int(ops[0]), b), scalar_type(st.dtype))
        elif st.kind == "valu":
            a = _lanes(ops[0], st.lanes)
            b = _lanes(ops[1], st.lanes) if len(ops) > 1 else [None] * st.lanes
            vals = [alu(str(st.imm[0]), int(x), None if y is None else int(y))
                    for x, y in zip(a, b, strict=True)]
            t = VectorType((st.lanes,), scalar_type(st.dtype))
            self.vals[s] = of_type(np.array(vals, dtype=object).astype(np.int64), t)
        elif st.kind == "mem":
            m = self.m.val[int(st.imm[0])]
            pos = element_index(m, tuple(ops), "mem stream")
            self.vals[s] = m[pos]
            self.src[s] = self.load(m, pos, m.itemsize, dep, layer, s)
        elif st.kind == "vmem":
            self.vmem(s, ops, dep, layer)
        else:
            raise InterpretError(f"stream {s}: kind {st.kind} is set by its TU")

    def load(self, m: np.ndarray, pos: tuple[int, ...], n: int, dep: int, layer: int,
             s: int) -> int:
        return self.trace.load(self.m.address(m, pos), n, dep, s in self.queued, layer)

    def vmem(self, s: int, ops: list[Any], dep: int, layer: int) -> None:
        st = self.e.streams[s]
        m = self.m.val[int(st.imm[0])]
        mask = np.asarray(ops[-1], dtype=bool)
        vl = mask.shape[0]
        idx = [_lanes(a, vl) for a in ops[:-1]]
        out = np.zeros(vl, dtype=m.dtype)
        active = np.flatnonzero(mask)
        if st.imm[1] and len(active):
            a0, count = int(active[0]), int(active[-1] - active[0] + 1)
            start = element_index(m, tuple(i[a0] for i in idx), "vmem stream")
            element_index(m, start[:-1] + (start[-1] + count - 1,), "vmem stream")
            out[a0:a0 + count] = m[start[:-1]][start[-1]:start[-1] + count]
            out[~mask] = 0
            self.src[s] = self.load(m, start, count * m.itemsize, dep, layer, s)
        else:
            for lane in active:
                pos = element_index(m, tuple(i[lane] for i in idx), "vmem stream")
                out[lane] = m[pos]
                self.src[s] = self.load(m, pos, m.itemsize, dep, layer, s)
        self.vals[s] = out
