"""The Python reference emulator of DAE programs (docs/DAE_PROGRAM.md, "Execution"):
``run_program`` executes a program functionally — bit-exact with the DLC interpreter — and
records its access/execute ``Trace`` in program order; ``emulate`` adds the timing model.

The access engine is a generator (demand-driven, as ``dae_target/interp/dlc.py``): asked for
the next control token it runs its traversal units until it pushes one; the core runs the
token's case at once. Loads are recorded with the address of the element in its buffer (each
buffer has its own 4 KiB-aligned base), the load its address depends on, the traversal layer
(the TU's depth) and whether its data goes to the queue."""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember_xla.dae.model import DaeProgram, Instr, ir_type
from ember_xla.dae.ops import op_class
from ember_xla.dae.semantics import step
from ember_xla.dae.values import scalar
from ember_xla.emulator.reference_access import Access
from ember_xla.emulator.trace import Trace
from ember_xla.ir.interpreter import InterpretError
from ember_xla.ir.types import numpy_dtype

PAGE = 4096


class Machine:
    """One run of a program: registers, buffer addresses, the trace and the case costs."""

    def __init__(self, p: DaeProgram, inputs: Sequence[Any],
                 output_shapes: Sequence[Sequence[int]] | None) -> None:
        self.p = p
        self.types = [ir_type(r) for r in p.regs]
        self.val: list[Any] = [None] * len(p.regs)
        self.trace = Trace()
        self.base: dict[int, int] = {}      # id(buffer) -> base address
        self.placed: list[np.ndarray] = []  # keeps the buffers (and so their ids) alive
        self.next_base = PAGE
        self.cb = p.callback_numbers()
        self.ops = [collections.Counter() for _ in range(sum(len(e.cases) for e in p.engines))]
        self.fired = [0] * len(self.ops)
        self.classes: dict[int, str | None] = {}  # id(instruction) -> op class
        for e, cb in zip(p.engines, self.cb, strict=True):
            for c in e.cases:
                pops = sum(1 for i in c.code if i.op == "pop")
                self.trace.define_case(cb[c.id], {}, pops)
        self._bind(inputs, output_shapes)

    def _bind(self, inputs: Sequence[Any], output_shapes: Sequence[Sequence[int]] | None
              ) -> None:
        p = self.p
        if len(inputs) != p.num_inputs:
            raise InterpretError(f"{p.name} takes {p.num_inputs} inputs, got {len(inputs)}")
        outs = [a for a in p.args if a.role == "out"]
        if output_shapes is not None and len(output_shapes) != len(outs):
            raise InterpretError(f"{p.name}: {len(output_shapes)} output shapes for "
                                 f"{len(outs)} outputs")
        for k, a in enumerate(p.args):
            dt = numpy_dtype(self.types[a.reg].elem)
            if a.role == "in":
                x = np.asarray(inputs[k])
                if x.dtype != dt or x.ndim != len(a.shape) or any(
                        d >= 0 and d != s for d, s in zip(a.shape, x.shape, strict=True)):
                    raise InterpretError(f"input {k} ({a.name}): got {x.dtype}{list(x.shape)},"
                                         f" the program wants {a.dtype}{list(a.shape)}")
                arr = np.array(x, order="C", copy=True)  # (keeps a 0-d array 0-d)
            else:
                shape = tuple(output_shapes[k - p.num_inputs]) if output_shapes is not None \
                    else a.shape
                if len(shape) != len(a.shape) or any(d < 0 for d in shape):
                    raise InterpretError(f"output {a.name}: shape {list(shape)} unknown or of "
                                         "the wrong rank (pass output_shapes)")
                if a.init >= 0:  # updated in place: starts as its input
                    src = self.val[p.args[a.init].reg]
                    if src.shape != shape:
                        raise InterpretError(f"output {a.name}: shape {list(shape)} differs "
                                             f"from its input's {list(src.shape)}")
                    arr = src.copy()
                else:
                    arr = np.full(shape, np.nan, dtype=dt)
            self.val[a.reg] = arr
            self._place(arr)

    def _place(self, arr: np.ndarray) -> None:
        self.base[id(arr)] = self.next_base
        self.placed.append(arr)
        end = self.next_base + max(int(arr.nbytes), 1)
        self.next_base = -(-end // PAGE) * PAGE

    def address(self, m: np.ndarray, pos: tuple[int, ...]) -> int:
        if id(m) not in self.base:
            raise InterpretError("a stream loads from a buffer without an address")
        flat = int(np.ravel_multi_index(pos, m.shape)) if m.ndim else 0
        return self.base[id(m)] + flat * m.itemsize

    # -- core -------------------------------------------------------------------------------
    def run_code(self, code: tuple[Instr, ...], lo: int, hi: int,
                 cnt: collections.Counter | None, queue: collections.deque | None = None
                 ) -> None:
        i = lo
        while i < hi:
            ins = code[i]
            op = ins.op
            if cnt is not None:
                key = id(ins)
                if key not in self.classes:
                    self.classes[key] = op_class(ins, self.p.regs)
                cls = self.classes[key]
                if cls is not None and op != "for":
                    cnt[cls] += 1
            if op == "for":
                lb, ub, st = (int(self.val[s]) for s in ins.src)
                n = int(ins.imm[0])
                if st <= 0:
                    raise InterpretError(f"for: step must be positive, got {st}")
                for k in range(lb, ub, st):
                    self.val[ins.dst[0]] = np.int64(k)
                    if cnt is not None:
                        cnt["scalar"] += 1
                    self.run_code(code, i + 1, i + 1 + n, cnt, queue)
                i += 1 + n
                continue
            if op == "if":
                n_then, n_else = (int(x) for x in ins.imm)
                if bool(self.val[ins.src[0]]):
                    self.run_code(code, i + 1, i + 1 + n_then, cnt, queue)
                else:
                    self.run_code(code, i + 1 + n_then, i + 1 + n_then + n_else, cnt, queue)
                i += 1 + n_then + n_else
                continue
            if op == "run":
                self.run_engine(int(ins.imm[0]))
            elif op == "pop":
                self.val[ins.dst[0]] = self._pop(queue, ins.dst[0])
            elif op == "inc":
                r = ins.dst[0]
                self.val[r] = scalar(int(self.val[r]) + 1, self.types[r])
            else:
                src = [self.val[s] for s in ins.src]
                if op == "unique":
                    m = src[0]
                    for pos in np.ndindex(m.shape):
                        self.trace.load(self.address(m, pos), m.itemsize, -1, False, 0)
                outs = step(ins, src, [self.types[d] for d in ins.dst])
                for d, x in zip(ins.dst, outs, strict=True):
                    self.val[d] = x
                    if op in ("alloc", "unique") and isinstance(x, np.ndarray):
                        self._place(x)
            i += 1

    def _pop(self, queue: collections.deque | None, r: int) -> Any:
        if not queue:
            raise InterpretError("pop: the data queue is empty (operand not registered "
                                 "before the control token)")
        v = queue.popleft()
        t, have = self.types[r], np.asarray(v)
        want = numpy_dtype(t.elem if hasattr(t, "elem") else t)
        ndim = {"s": 0, "v": 1, "m": self.p.regs[r].n}[self.p.regs[r].cls]
        lanes_ok = self.p.regs[r].cls != "v" or have.shape == (self.p.regs[r].n,)
        if have.dtype != want or have.ndim != ndim or not lanes_ok:
            raise InterpretError(f"pop: the queue holds {have.dtype}{list(have.shape)}, the "
                                 f"case expects {t}")
        return v

    def run_engine(self, k: int) -> None:
        e = self.p.engines[k]
        for v in e.vars:
            self.val[v.reg] = self.val[v.init]
        queue: collections.deque = collections.deque()
        cases = {c.id: c for c in e.cases}
        for cid in Access(self, e, self.cb[k], queue).tokens():
            n = self.cb[k][cid]
            self.fired[n] += 1
            self.run_code(cases[cid].code, 0, len(cases[cid].code), self.ops[n], queue)
        if queue:
            raise InterpretError(f"engine {k}: {len(queue)} operands left in the data queue "
                                 "(registered but never popped)")
        for v in e.vars:
            if v.result >= 0:
                self.val[v.result] = self.val[v.reg]

    def finish(self) -> tuple[list[np.ndarray], Trace]:
        for n, (cnt, fired) in enumerate(zip(self.ops, self.fired, strict=True)):
            ops = {}
            for cls, total in cnt.items():
                mean = total / fired
                ops[cls] = int(mean) if mean == int(mean) else mean
            self.trace.cases[n].ops = ops
        return [self.val[a.reg] for a in self.p.args if a.role == "out"], self.trace


def run_program(program: DaeProgram, inputs: Sequence[Any],
                output_shapes: Sequence[Sequence[int]] | None = None
                ) -> tuple[list[np.ndarray], Trace]:
    """Execute ``program`` on ``inputs``; returns (outputs, trace). ``output_shapes``: needed
    when the program does not know its output shapes (the hand-written program)."""
    m = Machine(program, inputs, output_shapes)
    m.run_code(program.code, 0, len(program.code), None)
    return m.finish()


def emulate(program: DaeProgram, inputs: Sequence[Any], target: Any,
            output_shapes: Sequence[Sequence[int]] | None = None) -> tuple[list[np.ndarray], Any]:
    """``run_program`` + the timing model on ``target`` (after the binder accepted it):
    (outputs, TimingReport). ``ProgramDoesNotFit`` when the program does not fit."""
    from ember_xla.dae.bind import bind_program
    from ember_xla.emulator.timing import simulate

    bind_program(program, target)
    outs, trace = run_program(program, inputs, output_shapes)
    return outs, simulate(target, trace)

