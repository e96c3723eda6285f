"""Reference interpreter of the DLC dialect: the access engine is a producer, the compute loop
its consumer.

``dlc.configure_access_engine`` prepares the engine (nothing runs yet); the following
``dlc.compute_loop`` pulls control tokens from it. The engine is a generator: asked for the next
token it runs its traversal units until it pushes one, pushing data-queue entries on the way
(demand-driven schedule: the engine never runs further ahead than the next token). A root TU
runs after the stream ops that belong to no TU were evaluated once; each TU start is
``begin`` -> iterations (the TU's streams in program order, then its nested TUs in program
order, then ``iter``) -> ``end``; a vector TU's iteration covers ``vl`` lanes (tail masked).
The core pops one token, runs the case with that id (``pop_operand`` takes the next data-queue
entry, which must have the type the case expects), and stops when the engine is done. Entries
left in the data queue, an empty queue on a pop or an unknown case id are errors.

Counters (``Interpreter.counters``; the emulator's timing model builds on them):
- ``dlc.tokens``: control tokens pushed (each is popped and runs one case);
  ``dlc.callbacks.<id>``: cases run, per id;
- ``dlc.queue_entries`` / ``dlc.queue_bytes``: data-queue pushes and their size (a scalar is
  its dtype's size, a vector all ``VL`` lanes, a row buffer its whole length);
  ``dlc.queue_peak``: most entries waiting at once under the demand-driven schedule;
- ``dlc.buffers`` row buffers pushed, ``dlc.buffer_elements`` lanes written into them;
- ``dlc.tu_starts`` TU starts, ``dlc.tu_iterations`` TU iterations (vector iterations count 1);
- loads by the engine's streams are counted by the slc/slcv implementations (``slc.elements``,
  ``slc.bytes``, ``slcv.elements``, ``slcv.bytes``); ``counts()`` sums them into
  ``stream_elements`` / ``stream_bytes``.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from typing import Any

import numpy as np

from ember_xla.dae.values import element_index, scalar
from ember_xla.dae_target.dialects.dlc_engine import EngineError, EnginePlan, TUInfo, plan
from ember_xla.ir.interpreter import Interpreter, InterpreterFunctions, InterpretError, impl
from ember_xla.ir.operation import Operation
from ember_xla.ir.types import MemRefType, VectorType, element_type, numpy_dtype

TOKENS, ENTRIES, QBYTES, PEAK = ("dlc.tokens", "dlc.queue_entries", "dlc.queue_bytes",
                                 "dlc.queue_peak")
BUFFERS, BUF_ELEMS, STARTS, ITERS = ("dlc.buffers", "dlc.buffer_elements", "dlc.tu_starts",
                                     "dlc.tu_iterations")
CALLBACK = "dlc.callbacks."


def nbytes(v: Any) -> int:
    """Size of one data-queue entry."""
    return int(v.nbytes) if isinstance(v, np.ndarray) else int(np.asarray(v).itemsize)


class Engine:
    """One configured access engine: its plan, data queue and token generator."""

    def __init__(self, interp: Interpreter, p: EnginePlan) -> None:
        self.interp, self.plan = interp, p
        self.queue: collections.deque[Any] = collections.deque()
        self.tokens: Iterator[int] = self._run()

    def push(self, v: Any) -> None:
        self.queue.append(v)
        c = self.interp.counters
        c[ENTRIES] += 1
        c[QBYTES] += nbytes(v)
        c[PEAK] = max(c[PEAK], len(self.queue))

    def _run(self) -> Iterator[int]:
        for op in self.plan.once:
            self.interp.run_op(op)
        for tu in self.plan.roots:
            yield from self._tu(tu)

    def _fire(self, tu: TUInfo, event: str, buffers: dict[Operation, np.ndarray]) -> \
            Iterator[int]:
        for reg in tu.regs[event]:
            if reg.opcode == "dlc.register_callback":
                self.interp.count(TOKENS)
                yield int(reg.attributes["id"])
            elif reg in buffers:
                self.interp.count(BUFFERS)
                self.push(buffers[reg])
            else:
                v = self.interp.value(reg.operands[1])
                self.push(v.copy() if isinstance(v, np.ndarray) else v)

    def _tu(self, tu: TUInfo) -> Iterator[int]:
        interp = self.interp
        lb, ub, step = (int(interp.value(v)) for v in tu.op.bounds)
        if step <= 0:
            raise InterpretError(f"dlc.new_tu: step must be positive, got {step}")
        interp.count(STARTS)
        buffers = {r: np.zeros(max(ub, 0), numpy_dtype(r.operands[1].type.elem.elem))
                   for r in tu.buffers}
        yield from self._fire(tu, "begin", buffers)
        vl = tu.vl
        lanes = None if vl is None else np.arange(vl, dtype=np.int64) * step
        for base in range(lb, ub, step if vl is None else step * vl):
            interp.count(ITERS)
            if lanes is None:
                iv, mask = np.int64(base), None
            else:
                iv = base + lanes
                mask = iv < ub
            interp.set_values(tu.ind_vars, [iv] * len(tu.ind_vars))
            interp.set_values(tu.masks, [mask] * len(tu.masks))
            for op in tu.owned:
                interp.run_op(op)
            for reg, buf in buffers.items():
                vals = interp.value(reg.operands[1])
                for lane in np.flatnonzero(mask):
                    (pos,) = element_index(buf, (iv[lane],), "dlc row buffer")
                    buf[pos] = vals[lane]
                interp.count(BUF_ELEMS, int(mask.sum()))
            for child in tu.children:
                yield from self._tu(child)
            yield from self._fire(tu, "iter", buffers)
        yield from self._fire(tu, "end", buffers)


def _check_entry(v: Any, t: Any) -> None:
    want = numpy_dtype(element_type(t))
    have = np.asarray(v)
    shape_ok = (have.ndim == 0 if not isinstance(t, VectorType | MemRefType)
                else have.ndim == len(t.shape)
                and all(d is None or d == s for d, s in zip(t.shape, have.shape, strict=True)))
    if have.dtype != want or not shape_ok:
        raise InterpretError(f"dlc.pop_operand: the queue holds {have.dtype}{list(have.shape)}, "
                             f"the case expects {t}")


class DlcFunctions(InterpreterFunctions):
    """dlc.* implementations (with the slc, slcv and execute-side function sets)."""

    def __init__(self) -> None:
        self.pending: list[Engine] = []
        self.engines: list[Engine] = []
        self.vars: list[dict[str, Any]] = []

    @impl("dlc.configure_access_engine")
    def configure(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        try:
            p = plan(op)
        except EngineError as e:
            raise InterpretError(f"dlc.configure_access_engine: {e}") from None
        self.pending.append(Engine(interp, p))
        return ()

    @impl("dlc.compute_loop")
    def compute_loop(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        if not self.pending:
            raise InterpretError("dlc.compute_loop: no configured access engine")
        engine = self.pending.pop()
        names = list(op.attributes.get("vars", []))
        cases = {c: r for c, r in zip(op.attributes["cases"], op.regions, strict=True)}
        self.engines.append(engine)
        self.vars.append(dict(zip(names, args, strict=True)))
        for token in engine.tokens:
            if token not in cases:
                raise InterpretError(f"dlc.compute_loop: control token {token} has no case")
            interp.count(CALLBACK + str(token))
            interp.run_region(cases[token])
        if engine.queue:
            raise InterpretError(f"dlc.compute_loop: {len(engine.queue)} operands left in the "
                                 "data queue (registered but never popped)")
        self.engines.pop()
        final = self.vars.pop()
        return tuple(scalar(final[n], r.type) for n, r in zip(names, op.results, strict=True))

    @impl("dlc.pop_operand")
    def pop_operand(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        q = self.engines[-1].queue
        if not q:
            raise InterpretError("dlc.pop_operand: the data queue is empty (operand not "
                                 "registered before the control token)")
        v = q.popleft()
        _check_entry(v, op.results[0].type)
        return (v,)

    @impl("dlc.get_var")
    def get_var(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        return (self.vars[-1][op.attributes["name"]],)

    @impl("dlc.set_var")
    def set_var(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        self.vars[-1][op.attributes["name"]] = args[0]
        return ()

    @impl("dlc.increment_var")
    def increment_var(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        name = op.attributes["name"]
        old = self.vars[-1][name]
        self.vars[-1][name] = type(old)(old + 1)
        return ()

    @impl("dlc.yield")
    def yield_(self, interp: Interpreter, op: Operation, args: tuple) -> tuple:
        return ()


def functions() -> list[InterpreterFunctions]:
    """The function sets this module provides (``interp/run.py`` adds slc/slcv/execute)."""
    return [DlcFunctions()]


def counts(interp_counters: dict[str, int]) -> dict[str, int]:
    """The DLC counters of a finished run (from ``Interpreter.counters`` or ``run_counted``),
    with the engine's loads summed over slc and slcv streams."""
    c = collections.Counter(interp_counters)
    out = {k: c[k] for k in (TOKENS, ENTRIES, QBYTES, PEAK, BUFFERS, BUF_ELEMS, STARTS, ITERS)}
    out.update({k: v for k, v in c.items() if k.startswith(CALLBACK)})
    out["stream_elements"] = c["slc.elements"] + c["slcv.elements"]
    out["stream_bytes"] = c["slc.bytes"] + c["slcv.bytes"]
    return out
