"""One engine of a DAE program from a ``dlc.configure_access_engine`` + ``dlc.compute_loop``
pair: traversal units, streams (in program order, with the TU that evaluates them),
registrations, core variables and cases (used by ``emit.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ember_xla.dae.model import (
    TU,
    Case,
    Engine,
    Instr,
    ProgramError,
    Registration,
    Stream,
    Var,
    dtype_of,
    reg_of_type,
)
from ember_xla.dae_target.dialects.dlc_engine import EnginePlan
from ember_xla.dae_target.dialects.slc import StreamType
from ember_xla.ir.operation import Operation
from ember_xla.ir.types import VectorType
from ember_xla.ir.value import Value

if TYPE_CHECKING:
    from ember_xla.dae_target.program.emit import Emitter

_KINDS = {"slc.mem_stream": "mem", "slcv.mem_stream": "vmem", "slc.alu_stream": "alu",
          "slcv.alu_stream": "valu"}


def _elem(v: Value) -> tuple[str, int]:
    """(dtype, lanes) of a stream value."""
    t = v.type.elem if isinstance(v.type, StreamType) else v.type
    if isinstance(t, VectorType):
        return dtype_of(t.elem), t.shape[0]
    return dtype_of(t), 0


class _Engine:
    def __init__(self, em: Emitter, p: EnginePlan) -> None:
        self.em = em
        self.tus: list[TU] = []
        self.tu_of: dict[Operation, int] = {}
        self.streams: list[Stream] = []
        self.stream_of: dict[Value, int] = {}
        self.regs: list[Registration] = []
        self.buffers = {op for info in p.tus.values() for op in info.buffers}
        self.plan = p

    def add(self, v: Value, owner: int, kind: str, src: tuple[int, ...] = (),
            imm: tuple = ()) -> None:
        dtype, lanes = _elem(v)
        self.streams.append(Stream(owner, kind, dtype, lanes, src, imm))
        self.stream_of[v] = len(self.streams) - 1

    def stream(self, v: Value, op: Operation) -> int:
        """The stream id of ``v`` (a core value used as a stream becomes a ``reg`` stream)."""
        if v not in self.stream_of:
            if v not in self.em.reg_of:
                raise ProgramError(f"{op.opcode}: stream operand defined nowhere the engine "
                                   "can read it")
            self.add(v, -1, "reg", (), (self.em.reg_of[v],))
        return self.stream_of[v]

    def owner_tu(self, op: Operation) -> int:
        for info in self.plan.tus.values():
            if op in info.owned:
                return self.tu_of[info.op]
        return -1

    def op(self, op: Operation) -> None:
        code = op.opcode
        if code == "dlc.new_tu":
            parent = -1 if op.parent_tu is None else self.tu_of[op.parent_tu.owner]
            lb, ub, step = (self.stream(b, op) for b in op.bounds)
            self.tus.append(TU(parent, lb, ub, step, int(op.vl or 0)))
            self.tu_of[op] = len(self.tus) - 1
        elif code in ("dlc.get_ind_var", "dlc.get_mask"):
            t = self.tu_of[op.operands[0].owner]
            self.add(op.result, t, "ind" if code == "dlc.get_ind_var" else "mask", (), (t,))
        elif code in ("slc.to_stream", "slc.fwd_stream"):
            if code == "slc.fwd_stream":
                self.stream_of[op.result] = self.stream(op.operands[0], op)
            else:
                self.add(op.result, -1, "reg", (), (self.em.use(op.operands[0], op),))
        elif code in _KINDS:
            kind = _KINDS[code]
            if kind in ("mem", "vmem"):
                buf = self.em.use(op.operands[0], op)
                src = tuple(self.stream(v, op) for v in op.operands[1:])
                imm = (buf,) if kind == "mem" else (
                    buf, int(bool(op.attributes.get("contiguous", False))))
            else:
                src = tuple(self.stream(v, op) for v in op.operands)
                imm = (str(op.attributes["op"]),)
            self.add(op.result, self.owner_tu(op), kind, src, imm)
        elif code == "dlc.register_operand":
            t = self.tu_of[op.operands[0].owner]
            what = "buffer" if op in self.buffers else "push"
            self.regs.append(Registration(t, op.attributes["event"], what,
                                          self.stream(op.operands[1], op)))
        elif code == "dlc.register_callback":
            t = self.tu_of[op.operands[0].owner]
            self.regs.append(Registration(t, op.attributes["event"], "token",
                                          int(op.attributes["id"])))
        else:
            raise ProgramError(f"{code}: not expressible on the access engine")


def emit_engine(em: Emitter, configure: Operation, loop: Operation, p: EnginePlan) -> Engine:
    e = _Engine(em, p)
    for op in configure.body.ops:
        e.op(op)
    registered = {r.value for r in e.regs if r.what == "token"}
    names = list(loop.attributes.get("vars", []))
    var_regs: dict[str, int] = {}
    variables = []
    for name, init, res in zip(names, loop.operands, loop.results, strict=True):
        reg = em.new(reg_of_type(init.type))
        var_regs[name] = reg
        variables.append(Var(name, reg, em.use(init, loop), em.define(res) if res.uses
                             else -1))
    cases = []
    for cid, region in zip(loop.attributes["cases"], loop.regions, strict=True):
        code: list[Instr] = []
        em.block(region.block, code, in_case=True, nested=False, var_regs=var_regs)
        cases.append(Case(int(cid), tuple(code)))
    missing = registered - {c.id for c in cases}
    if missing:
        raise ProgramError(f"dlc.compute_loop: control token {min(missing)} has no case")
    return Engine(tuple(e.tus), tuple(e.streams), tuple(e.regs), tuple(variables),
                  tuple(cases))
