"""The human-readable form of a DAE program (``ember-xla lower --emit=program``,
``str(program)``): arguments, registers, each engine's traversal units, streams and
registrations, its cases as indented instruction lists, and the top-level code."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ember_xla.dae.ops import body_length

if TYPE_CHECKING:
    from ember_xla.dae.model import DaeProgram, Engine, Instr, Reg, Stream


def _r(k: int) -> str:
    return f"r{k}" if k >= 0 else "-"


def _code(code: tuple[Instr, ...], regs: tuple[Reg, ...], indent: int) -> list[str]:
    out: list[str] = []

    def emit(lo: int, hi: int, depth: int) -> None:
        i = lo
        while i < hi:
            ins = code[i]
            pad = "  " * depth
            dst = ", ".join(_r(d) for d in ins.dst)
            src = ", ".join(_r(s) for s in ins.src)
            imm = " ".join(repr(x) if isinstance(x, float) else str(x) for x in ins.imm)
            if ins.op == "for":
                out.append(f"{pad}for {dst} in range({src}):")
                emit(i + 1, i + 1 + int(ins.imm[0]), depth + 1)
            elif ins.op == "if":
                n_then, n_else = (int(x) for x in ins.imm)
                out.append(f"{pad}if {src}:")
                emit(i + 1, i + 1 + n_then, depth + 1)
                if n_else:
                    out.append(f"{pad}else:")
                    emit(i + 1 + n_then, i + 1 + n_then + n_else, depth + 1)
            elif ins.op == "inc":
                out.append(f"{pad}inc {dst}")
            else:
                lhs = f"{dst} = " if dst else ""
                types = f"  : {', '.join(str(regs[d]) for d in ins.dst)}" if ins.dst else ""
                out.append(f"{pad}{lhs}{ins.op} {src}{' ' if src and imm else ''}{imm}"
                           .rstrip() + types)
            i += body_length(code, i)

    emit(0, len(code), indent)
    return out


def _stream(k: int, s: Stream) -> str:
    t = f"vector<{s.lanes}x{s.dtype}>" if s.lanes else s.dtype
    owner = f"tu{s.owner}" if s.owner >= 0 else "once"
    src = ", ".join(f"s{x}" for x in s.src)
    imm = {"reg": lambda: f"r{s.imm[0]}", "ind": lambda: f"tu{s.imm[0]}",
           "mask": lambda: f"tu{s.imm[0]}",
           "mem": lambda: f"r{s.imm[0]}[{src}]",
           "vmem": lambda: f"r{s.imm[0]}[{src}]{' contiguous' if s.imm[1] else ''}",
           }.get(s.kind, lambda: f"{s.imm[0]}({src})")()
    return f"  s{k} = {s.kind} {imm} : {t}   [{owner}]"


def _engine(k: int, e: Engine, regs: tuple[Reg, ...]) -> list[str]:
    out = [f"engine {k}:"]
    for t, u in enumerate(e.tus):
        parent = f" in tu{u.parent}" if u.parent >= 0 else ""
        vl = f" vl={u.vl}" if u.vl else ""
        out.append(f"  tu{t} = range(s{u.lb}, s{u.ub}, s{u.step}){vl}{parent}"
                   f"   [layer {e.depth(t)}]")
    out += [_stream(s, st) for s, st in enumerate(e.streams)]
    for r in e.registrations:
        what = f"token {r.value}" if r.what == "token" else f"{r.what} s{r.value}"
        out.append(f"  on tu{r.tu}.{r.event}: {what}")
    for v in e.vars:
        out.append(f"  var {v.name} = r{v.reg} (init r{v.init}, result {_r(v.result)})")
    for c in e.cases:
        out.append(f"  case {c.id}:")
        out += _code(c.code, regs, 2)
    return out


def print_program(p: DaeProgram) -> str:
    """The program as indented text (for people; ``to_text`` is the exchange form)."""
    out = [f"dae program {p.name} (kind {p.kind}, format version {p.version})"]
    for a in p.args:
        shape = "x".join("?" if d < 0 else str(d) for d in a.shape) or "scalar"
        init = f" (starts as {p.args[a.init].name}: updated in place)" if a.init >= 0 else ""
        out.append(f"  {a.role:3} r{a.reg} {a.name}: {a.dtype}[{shape}]{init}")
    for k, e in enumerate(p.engines):
        out += _engine(k, e, p.regs)
    out.append("code:")
    out += _code(p.code, p.regs, 1)
    return "\n".join(out) + "\n"
