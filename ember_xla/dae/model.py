"""The DAE program data model (format version 1, docs/DAE_PROGRAM.md): the arguments, the
register table, the engines (traversal units, streams, registrations, core variables, cases)
and the top-level code of one lowered cluster. Plain frozen dataclasses; equality is exact
(float immediates compare by their ``repr``, so NaN constants and -0.0 compare as written)."""

from __future__ import annotations

import dataclasses

from ember_xla.dae.errors import ProgramError
from ember_xla.ir.types import (
    FloatType,
    IndexType,
    IntegerType,
    MemRefType,
    Type,
    VectorType,
)

VERSION = 1
DTYPES = ("f64", "f32", "f16", "bf16", "i64", "i32", "i16", "i8", "i1", "index")
EVENTS = ("begin", "iter", "end")
REG_CLASSES = ("s", "v", "m")
ROLES = ("in", "out")
WHAT = ("push", "buffer", "token")

Imm = int | float | str


def _key(x: Imm) -> tuple:
    return ("f", repr(x)) if isinstance(x, float) else (type(x).__name__, x)


@dataclasses.dataclass(frozen=True, eq=False)
class Instr:
    """One instruction: ``op``, destination and source registers, immediates."""

    op: str
    dst: tuple[int, ...] = ()
    src: tuple[int, ...] = ()
    imm: tuple[Imm, ...] = ()

    def _cmp(self) -> tuple:
        return (self.op, self.dst, self.src, tuple(_key(x) for x in self.imm))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Instr) and self._cmp() == other._cmp()

    def __hash__(self) -> int:
        return hash(self._cmp())


@dataclasses.dataclass(frozen=True)
class Reg:
    """A register: class ``s`` (scalar, n = 0), ``v`` (vector of n lanes), ``m`` (memref of
    rank n)."""

    cls: str
    dtype: str
    n: int = 0

    def __str__(self) -> str:
        return {"s": self.dtype, "v": f"vector<{self.n}x{self.dtype}>",
                "m": f"memref<{'?x' * self.n}{self.dtype}>"}[self.cls]


@dataclasses.dataclass(frozen=True)
class Arg:
    name: str
    role: str                  # "in" | "out"
    reg: int
    dtype: str
    shape: tuple[int, ...]     # -1 = unknown
    init: int = -1             # an output that starts as a copy of input arg ``init`` (its
    #                            update in place: a fused optimizer's table); -1: poisoned


@dataclasses.dataclass(frozen=True)
class TU:
    parent: int                # -1: a root TU
    lb: int                    # stream ids
    ub: int
    step: int
    vl: int = 0                # 0: scalar TU


@dataclasses.dataclass(frozen=True)
class Stream:
    owner: int                 # TU evaluating it each iteration; -1: once at engine start
    kind: str                  # reg ind mask mem vmem alu valu
    dtype: str
    lanes: int                 # 0: scalar
    src: tuple[int, ...] = ()  # stream operands
    imm: tuple[Imm, ...] = ()


@dataclasses.dataclass(frozen=True)
class Registration:
    tu: int
    event: str                 # begin | iter | end
    what: str                  # push | buffer | token
    value: int                 # a stream id, or the token's case id


@dataclasses.dataclass(frozen=True)
class Var:
    name: str
    reg: int
    init: int
    result: int                # -1: unused


@dataclasses.dataclass(frozen=True)
class Case:
    id: int
    code: tuple[Instr, ...]


@dataclasses.dataclass(frozen=True)
class Engine:
    tus: tuple[TU, ...]
    streams: tuple[Stream, ...]
    registrations: tuple[Registration, ...]
    vars: tuple[Var, ...]
    cases: tuple[Case, ...]

    def depth(self, t: int) -> int:
        d = 0
        while self.tus[t].parent >= 0:
            t, d = self.tus[t].parent, d + 1
        return d

    def case(self, case_id: int) -> Case:
        for c in self.cases:
            if c.id == case_id:
                return c
        raise ProgramError(f"no case {case_id}")


@dataclasses.dataclass(frozen=True)
class DaeProgram:
    name: str
    kind: str                  # the cluster kind, "-" when unknown
    num_inputs: int
    args: tuple[Arg, ...]
    regs: tuple[Reg, ...]
    engines: tuple[Engine, ...]
    code: tuple[Instr, ...]
    version: int = VERSION

    def __str__(self) -> str:
        from ember_xla.dae.printer import print_program

        return print_program(self)

    def callback_numbers(self) -> list[dict[int, int]]:
        """Per engine, case id -> callback number (the trace's token id: the case's index in
        the program, engines in order)."""
        out, n = [], 0
        for e in self.engines:
            out.append({c.id: n + k for k, c in enumerate(e.cases)})
            n += len(e.cases)
        return out


def dtype_of(t: Type) -> str:
    """The program dtype name of a scalar IR type."""
    if isinstance(t, IndexType):
        return "index"
    if isinstance(t, IntegerType | FloatType) and str(t) in DTYPES:
        return str(t)
    raise ProgramError(f"type {t} has no DAE program dtype")


def reg_of_type(t: Type) -> Reg:
    """The register for a value of IR type ``t``."""
    if isinstance(t, VectorType):
        if len(t.shape) != 1:
            raise ProgramError(f"{t}: only 1-D vectors")
        return Reg("v", dtype_of(t.elem), t.shape[0])
    if isinstance(t, MemRefType):
        return Reg("m", dtype_of(t.elem), t.rank)
    return Reg("s", dtype_of(t), 0)


def scalar_type(dtype: str) -> Type:
    if dtype == "index":
        return IndexType()
    if dtype.startswith("i"):
        return IntegerType(int(dtype[1:]))
    return FloatType(dtype)


def ir_type(r: Reg) -> Type:
    """The IR type a register holds (memref dims dynamic)."""
    el = scalar_type(r.dtype)
    if r.cls == "v":
        return VectorType((r.n,), el)
    if r.cls == "m":
        return MemRefType((None,) * r.n, el)
    return el
