"""The text form of DAE programs (docs/DAE_PROGRAM.md, "The text form"): one record per line
(or per ``;``), whitespace-separated integers, floats and identifiers, so a small C++ parser
reads it without a JSON library. ``from_text(to_text(p)) == p`` exactly."""

from __future__ import annotations

import math
import re

from ember_xla.dae.errors import ProgramError
from ember_xla.dae.model import (
    DTYPES,
    EVENTS,
    REG_CLASSES,
    ROLES,
    TU,
    VERSION,
    WHAT,
    Arg,
    Case,
    DaeProgram,
    Engine,
    Imm,
    Instr,
    Reg,
    Registration,
    Stream,
    Var,
)
from ember_xla.dae.ops import STREAM_KINDS, body_length, check_shape
from ember_xla.dae.validate import validate

HEADER = "ember-dae"
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$|^-$")


def _imm(x: Imm) -> str:
    if isinstance(x, bool):
        return str(int(x))
    if isinstance(x, float):
        return repr(x) if math.isfinite(x) or math.isnan(x) else ("inf" if x > 0 else "-inf")
    if isinstance(x, str) and not _IDENT.match(x):
        raise ProgramError(f"immediate {x!r} is not an identifier")
    return str(x)


def _ins(i: Instr) -> str:
    return " ".join([i.op, str(len(i.dst)), str(len(i.src)), str(len(i.imm)),
                     *map(str, i.dst), *map(str, i.src), *map(_imm, i.imm)])


def to_text(p: DaeProgram, one_line: bool = False) -> str:
    """The program's text; ``one_line``: records separated by ``;`` (for backend_config)."""
    out = [f"{HEADER} {p.version}",
           f"program {p.name} {p.kind} {p.num_inputs} {len(p.args)} {len(p.regs)} "
           f"{len(p.engines)}"]
    for k, a in enumerate(p.args):
        out.append(" ".join(["arg", str(k), a.name, a.role, str(a.reg), a.dtype,
                             str(len(a.shape)), *map(str, a.shape)]))
        if a.init >= 0:
            out.append(f"init {k} {a.init}")
    out += [f"reg {k} {r.cls} {r.dtype} {r.n}" for k, r in enumerate(p.regs)]
    for k, e in enumerate(p.engines):
        out.append(f"engine {k} {len(e.tus)} {len(e.streams)} {len(e.registrations)} "
                   f"{len(e.vars)} {len(e.cases)}")
        out += [f"tu {t} {u.parent} {u.lb} {u.ub} {u.step} {u.vl}" for t, u in enumerate(e.tus)]
        for s, st in enumerate(e.streams):
            out.append(" ".join(["stream", str(s), str(st.owner), st.kind, st.dtype,
                                 str(st.lanes), str(len(st.src)), str(len(st.imm)),
                                 *map(str, st.src), *map(_imm, st.imm)]))
        out += [f"on {r.tu} {r.event} {r.what} {r.value}" for r in e.registrations]
        out += [f"var {v.name} {v.reg} {v.init} {v.result}" for v in e.vars]
        for c in e.cases:
            out.append(f"case {c.id} {len(c.code)}")
            out += [_ins(i) for i in c.code]
    out.append(f"code {len(p.code)}")
    out += [_ins(i) for i in p.code]
    out.append("end")
    return (";" if one_line else "\n").join(out) + ("" if one_line else "\n")


class _Reader:
    def __init__(self, text: str) -> None:
        recs = [r.split() for line in text.splitlines() for r in line.split(";")]
        self.recs = [r for r in recs if r]
        self.pos = 0

    def next(self, keyword: str | None = None) -> list[str]:
        if self.pos >= len(self.recs):
            raise ProgramError(f"DAE program text ends early (expected {keyword or 'a record'})")
        rec = self.recs[self.pos]
        self.pos += 1
        if keyword is not None and rec[0] != keyword:
            raise ProgramError(f"record {self.pos}: expected '{keyword}', got '{rec[0]}'")
        return rec

    def fail(self, msg: str) -> ProgramError:
        return ProgramError(f"record {self.pos}: {msg}")

    def int(self, tok: str) -> int:
        try:
            return int(tok)
        except ValueError:
            raise self.fail(f"expected an integer, got {tok!r}") from None

    def word(self, tok: str, allowed: tuple[str, ...] | None = None) -> str:
        if (allowed is not None and tok not in allowed) or not _IDENT.match(tok):
            raise self.fail(f"unexpected {tok!r}" + (f" (expected one of {', '.join(allowed)})"
                                                     if allowed else ""))
        return tok

    def fields(self, rec: list[str], n: int) -> list[str]:
        if len(rec) != n:
            raise self.fail(f"'{rec[0]}' record has {len(rec)} fields, expected {n}")
        return rec

    def imm(self, tok: str) -> Imm:
        if re.fullmatch(r"[-+]?\d+", tok):
            return int(tok)
        try:
            return float(tok) if not _IDENT.match(tok) or tok in ("nan", "inf") else tok
        except ValueError:
            raise self.fail(f"bad immediate {tok!r}") from None

    def counted(self, rec: list[str], at: int, kinds: int) -> tuple[list[list[str]], int]:
        counts = [self.int(x) for x in rec[at:at + kinds]]
        if any(c < 0 for c in counts) or len(rec) != at + kinds + sum(counts):
            raise self.fail(f"'{rec[0]}' record: field counts do not match")
        groups, k = [], at + kinds
        for c in counts:
            groups.append(rec[k:k + c])
            k += c
        return groups, k

    def instrs(self, n: int) -> tuple[Instr, ...]:
        out = []
        for _ in range(n):
            rec = self.next()
            (d, s, m), _ = self.counted(rec, 1, 3)
            ins = Instr(self.word(rec[0]), tuple(map(self.int, d)), tuple(map(self.int, s)),
                        tuple(map(self.imm, m)))
            check_shape(ins, f"record {self.pos}")
            out.append(ins)
        for i in range(len(out)):
            if i + body_length(out, i) > len(out):
                raise self.fail(f"the body of instruction {i} ({out[i].op}) runs past its list")
        return tuple(out)


def from_text(text: str) -> DaeProgram:
    """Parse the text form (``ProgramError`` naming the record on any error)."""
    r = _Reader(text)
    head = r.next(HEADER)
    if len(head) != 2 or head[1] != str(VERSION):
        raise ProgramError(f"unsupported DAE program version {' '.join(head[1:])!r} "
                           f"(this reader knows {VERSION})")
    _, name, kind, n_in, n_args, n_regs, n_eng = r.fields(r.next("program"), 7)
    args = []
    for k in range(r.int(n_args)):
        rec = r.next("arg")
        if len(rec) < 7 or r.int(rec[1]) != k or len(rec) != 7 + r.int(rec[6]):
            raise r.fail("bad 'arg' record")
        init = -1
        if r.pos < len(r.recs) and r.recs[r.pos][0] == "init":
            _, at, init_s = r.fields(r.next("init"), 3)
            if r.int(at) != k:
                raise r.fail(f"'init' record for arg {at} after arg {k}")
            init = r.int(init_s)
        args.append(Arg(r.word(rec[2]), r.word(rec[3], ROLES), r.int(rec[4]),
                        r.word(rec[5], DTYPES), tuple(map(r.int, rec[7:])), init))
    regs = []
    for k in range(r.int(n_regs)):
        _, idx, cls, dt, n = r.fields(r.next("reg"), 5)
        if r.int(idx) != k:
            raise r.fail(f"expected reg {k}")
        regs.append(Reg(r.word(cls, REG_CLASSES), r.word(dt, DTYPES), r.int(n)))
    engines = [_engine(r, k) for k in range(r.int(n_eng))]
    (_, n_code) = r.fields(r.next("code"), 2)
    code = r.instrs(r.int(n_code))
    r.fields(r.next("end"), 1)
    if r.pos != len(r.recs):
        raise r.fail("records after 'end'")
    return validate(DaeProgram(r.word(name), r.word(kind), r.int(n_in), tuple(args),
                               tuple(regs), tuple(engines), code))


def _engine(r: _Reader, k: int) -> Engine:
    _, idx, n_tu, n_st, n_on, n_var, n_case = r.fields(r.next("engine"), 7)
    if r.int(idx) != k:
        raise r.fail(f"expected engine {k}")
    tus = []
    for t in range(r.int(n_tu)):
        _, i, parent, lb, ub, step, vl = r.fields(r.next("tu"), 7)
        if r.int(i) != t:
            raise r.fail(f"expected tu {t}")
        tus.append(TU(*(r.int(x) for x in (parent, lb, ub, step, vl))))
    streams = []
    for s in range(r.int(n_st)):
        rec = r.next("stream")
        if len(rec) < 8 or r.int(rec[1]) != s:
            raise r.fail(f"expected stream {s}")
        (src, imm), _ = r.counted(rec, 6, 2)
        streams.append(Stream(r.int(rec[2]), r.word(rec[3], STREAM_KINDS),
                              r.word(rec[4], DTYPES), r.int(rec[5]), tuple(map(r.int, src)),
                              tuple(map(r.imm, imm))))
    regs = []
    for _ in range(r.int(n_on)):
        _, tu, ev, what, val = r.fields(r.next("on"), 5)
        regs.append(Registration(r.int(tu), r.word(ev, EVENTS), r.word(what, WHAT),
                                 r.int(val)))
    variables = []
    for _ in range(r.int(n_var)):
        _, name, reg, init, res = r.fields(r.next("var"), 5)
        variables.append(Var(r.word(name), r.int(reg), r.int(init), r.int(res)))
    cases = []
    for _ in range(r.int(n_case)):
        _, cid, n = r.fields(r.next("case"), 3)
        cases.append(Case(r.int(cid), r.instrs(r.int(n))))
    return Engine(tuple(tus), tuple(streams), tuple(regs), tuple(variables), tuple(cases))
