"""Structural checks of a DAE program (run by ``from_text`` and ``emit_program``): every
register, stream, TU, case and engine reference is in range, TUs are listed parents first,
streams read only earlier streams, registrations name existing streams and cases, bodies of
``for``/``if`` stay inside their list. ``ProgramError`` names what is wrong."""

from __future__ import annotations

from ember_xla.dae.errors import ProgramError
from ember_xla.dae.model import DaeProgram, Engine, Instr
from ember_xla.dae.ops import body_length, check_shape


def _code(p: DaeProgram, code: tuple[Instr, ...], where: str, top: bool) -> None:
    n = len(p.regs)
    for i, ins in enumerate(code):
        at = f"{where} instruction {i} ({ins.op})"
        check_shape(ins, at)
        if any(not 0 <= r < n for r in ins.dst + ins.src):
            raise ProgramError(f"{at}: register out of range (the program has {n})")
        if i + body_length(code, i) > len(code):
            raise ProgramError(f"{at}: its body runs past the end of its list")
        if ins.op == "run" and (not top or not 0 <= int(ins.imm[0]) < len(p.engines)):
            raise ProgramError(f"{at}: no engine {ins.imm[0]} to run here")
        if ins.op == "pop" and top:
            raise ProgramError(f"{at}: pop outside a case")


def _engine(p: DaeProgram, k: int, e: Engine) -> None:
    where = f"engine {k}"
    n_s, n_t = len(e.streams), len(e.tus)
    for t, u in enumerate(e.tus):
        if not -1 <= u.parent < t or u.vl < 0:
            raise ProgramError(f"{where} tu {t}: parent {u.parent} must be an earlier tu or -1")
        if any(not 0 <= s < n_s for s in (u.lb, u.ub, u.step)):
            raise ProgramError(f"{where} tu {t}: bound stream out of range")
    for s, st in enumerate(e.streams):
        if not -1 <= st.owner < n_t or any(not 0 <= x < s for x in st.src):
            raise ProgramError(f"{where} stream {s}: owner or operand out of range (operands "
                               "must be earlier streams)")
        if st.kind in ("ind", "mask") and st.imm[0] != st.owner:
            raise ProgramError(f"{where} stream {s}: {st.kind} must be owned by its tu")
        if st.kind in ("reg", "mem", "vmem") and not 0 <= int(st.imm[0]) < len(p.regs):
            raise ProgramError(f"{where} stream {s}: register out of range")
    ids = [c.id for c in e.cases]
    if len(set(ids)) != len(ids):
        raise ProgramError(f"{where}: case ids repeat")
    for r in e.registrations:
        if not 0 <= r.tu < n_t:
            raise ProgramError(f"{where}: registration on tu {r.tu} out of range")
        if r.what == "token" and r.value not in ids:
            raise ProgramError(f"{where}: control token {r.value} has no case")
        if r.what != "token" and not 0 <= r.value < n_s:
            raise ProgramError(f"{where}: registration of stream {r.value} out of range")
        if r.what == "buffer" and (r.event != "end" or not e.tus[r.tu].vl
                                   or not e.streams[r.value].lanes):
            raise ProgramError(f"{where}: a row buffer is a vector stream of a vector tu, "
                               "pushed at its end")
    for v in e.vars:
        if any(not -1 <= x < len(p.regs) for x in (v.reg, v.init, v.result)) or v.reg < 0:
            raise ProgramError(f"{where} var {v.name}: register out of range")
    for c in e.cases:
        _code(p, c.code, f"{where} case {c.id}", top=False)


def validate(p: DaeProgram) -> DaeProgram:
    """``p`` if it is well formed (else ``ProgramError``)."""
    if sum(a.role == "in" for a in p.args) != p.num_inputs or any(
            a.role == "in" for a in p.args[p.num_inputs:]):
        raise ProgramError(f"{p.name}: the first {p.num_inputs} arguments are the inputs")
    for a in p.args:
        if not 0 <= a.reg < len(p.regs) or p.regs[a.reg].cls != "m" or \
                p.regs[a.reg].n != len(a.shape):
            raise ProgramError(f"{p.name}: argument {a.name} needs a memref register of its rank")
        if a.init >= 0:
            src = p.args[a.init] if a.init < p.num_inputs else None
            if a.role != "out" or src is None or src.dtype != a.dtype \
                    or len(src.shape) != len(a.shape) or any(
                        x >= 0 and y >= 0 and x != y
                        for x, y in zip(src.shape, a.shape, strict=True)):
                raise ProgramError(f"{p.name}: output {a.name} starts as a copy of argument "
                                   f"{a.init}, which is not an input of its type and shape")
    for k, e in enumerate(p.engines):
        _engine(p, k, e)
    _code(p, p.code, "code", top=True)
    return p
