"""The resource binder: maps a DAE program onto a target's access unit (each traversal unit
to a traversal layer = its depth and a lane among that layer's) and refuses, with a one-line
``ProgramDoesNotFit``, a program that does not fit (docs/DAE_PROGRAM.md, "The binder"): too many
layers or lanes, broadcast or lockstep the target lacks, vectors wider than the execute unit,
data-queue entries (a row buffer) or the entries one callback pops bigger than the queue."""

from __future__ import annotations

import dataclasses

from ember_xla.dae.errors import ProgramDoesNotFit
from ember_xla.dae.model import DaeProgram, Engine
from ember_xla.machines.config import Target

BITS = {"f64": 64, "f32": 32, "f16": 16, "bf16": 16, "i64": 64, "i32": 32, "i16": 16, "i8": 8,
        "i1": 1, "index": 64}
_FOLD = {"addi": lambda a, b: a + b, "subi": lambda a, b: a - b, "muli": lambda a, b: a * b,
         "maxsi": max, "minsi": min}


@dataclasses.dataclass(frozen=True)
class Binding:
    """Where each TU runs: ``slots[engine][tu] = (layer, lane)``."""

    target: str
    slots: tuple[tuple[tuple[int, int], ...], ...]

    @property
    def layers_used(self) -> int:
        return max((layer + 1 for e in self.slots for layer, _ in e), default=0)

    def __str__(self) -> str:
        lines = [f"binding on {self.target}: {self.layers_used} traversal layer(s)"]
        for k, e in enumerate(self.slots):
            lines += [f"  engine {k} tu{t}: layer {layer} lane {lane}"
                      for t, (layer, lane) in enumerate(e)]
        return "\n".join(lines)


def static_regs(p: DaeProgram) -> dict[int, int]:
    """Integer registers whose value the top-level code fixes (constants, dims of arguments
    with known shapes, integer arithmetic of those)."""
    known: dict[int, int] = {}
    shapes = {a.reg: a.shape for a in p.args}
    for ins in p.code:
        d = ins.dst[0] if len(ins.dst) == 1 else None
        if d is None or p.regs[d].cls != "s" or p.regs[d].dtype not in ("index", "i64", "i32"):
            continue
        if ins.op == "const" and isinstance(ins.imm[0], int):
            known[d] = ins.imm[0]
        elif ins.op == "dim" and ins.src[0] in shapes and shapes[ins.src[0]][ins.imm[0]] >= 0:
            known[d] = shapes[ins.src[0]][int(ins.imm[0])]
        elif ins.op in _FOLD and all(s in known for s in ins.src):
            known[d] = _FOLD[ins.op](*(known[s] for s in ins.src))
        elif ins.op == "mov" and ins.src[0] in known:
            known[d] = known[ins.src[0]]
    return known


def _static_streams(e: Engine, regs: dict[int, int]) -> dict[int, int]:
    from ember_xla.dae.numerics import alu

    out: dict[int, int] = {}
    for s, st in enumerate(e.streams):
        if st.kind == "reg" and st.imm[0] in regs:
            out[s] = regs[int(st.imm[0])]
        elif st.kind == "alu" and all(x in out for x in st.src) and st.imm[0] != "cast":
            vals = [out[x] for x in st.src]
            out[s] = alu(str(st.imm[0]), vals[0], vals[1] if len(vals) > 1 else None)
    return out


def _entry_bytes(e: Engine, what: str, s: int, tu: int, static: dict[int, int]) -> int | None:
    st = e.streams[s]
    size = BITS[st.dtype] // 8 or 1
    if what == "push":
        return size * max(st.lanes, 1)
    ub = static.get(e.tus[tu].ub)
    return None if ub is None else size * max(ub, 0)


def _check_engine(p: DaeProgram, k: int, e: Engine, t: Target, regs: dict[int, int]
                  ) -> tuple[tuple[int, int], ...]:
    a = t.access
    where = f"{p.name} does not fit {t.name}"
    depth = [e.depth(u) for u in range(len(e.tus))]
    if depth and max(depth) + 1 > a.layers:
        raise ProgramDoesNotFit(f"{where}: engine {k} nests {max(depth) + 1} traversal units, "
                                f"the access unit has {a.layers} layers (access_unit.layers)")
    slots, used = [], [0] * (max(depth, default=0) + 1)
    for u, d in enumerate(depth):
        slots.append((d, used[d]))
        used[d] += 1
        if used[d] > a.lanes:
            raise ProgramDoesNotFit(f"{where}: engine {k} has {used[d]} traversal units in "
                                    f"layer {d}, the access unit has {a.lanes} lanes "
                                    "(access_unit.lanes)")
        kids = sum(1 for x in e.tus if x.parent == u)
        if kids > 1 and not a.broadcast:
            raise ProgramDoesNotFit(f"{where}: traversal unit {u} of engine {k} feeds {kids} "
                                    "nested units and the target has no broadcast "
                                    "(access_unit.broadcast)")
        if e.tus[u].vl and not a.lockstep:
            raise ProgramDoesNotFit(f"{where}: engine {k} has a vector traversal unit and the "
                                    "target has no lockstep lanes (access_unit.lockstep)")
    cap = a.data_queue_bytes * a.lanes
    static = _static_streams(e, regs)
    pending = 0
    for r in e.registrations:
        if r.what == "token":
            if pending > cap:
                raise ProgramDoesNotFit(f"{where}: callback {r.value} of engine {k} pops "
                                        f"{pending} bytes, more than the {cap}-byte data queue "
                                        "holds (access_unit.data_queue_bytes x lanes)")
            pending = 0
            continue
        n = _entry_bytes(e, r.what, r.value, r.tu, static)
        if n is None:
            continue
        if n > cap:
            raise ProgramDoesNotFit(f"{where}: a data-queue entry of {n} bytes (a "
                                    f"{'row buffer' if r.what == 'buffer' else 'value'}) "
                                    f"exceeds the {cap}-byte data queue "
                                    "(access_unit.data_queue_bytes x lanes)")
        pending += n
    return tuple(slots)


def bind_program(program: DaeProgram, target: Target) -> Binding:
    """Bind ``program`` to ``target`` or raise ``ProgramDoesNotFit`` with the reason."""
    for r in program.regs:
        if r.cls == "v" and r.dtype != "i1" and r.n * BITS[r.dtype] > target.execute.vector_bits:
            raise ProgramDoesNotFit(
                f"{program.name} does not fit {target.name}: a vector<{r.n}x{r.dtype}> "
                f"({r.n * BITS[r.dtype]} bits) is wider than the execute unit's "
                f"{target.execute.vector_bits} bits (execute_unit.vector_bits)")
    regs = static_regs(program)
    slots = tuple(_check_engine(program, k, e, target, regs)
                  for k, e in enumerate(program.engines))
    return Binding(target.name, slots)
