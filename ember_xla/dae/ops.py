"""The instruction and stream tables of DAE programs (docs/DAE_PROGRAM.md): which IR op each
instruction comes from, its shape (destinations, sources, immediates) and its op class for the
timing model (``target.OP_CLASSES``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ember_xla.dae.errors import ProgramError

if TYPE_CHECKING:
    from ember_xla.dae.model import Instr, Reg

FLOAT_BINARY = ("addf", "subf", "mulf", "divf", "maxf", "minf")
INT_BINARY = ("addi", "subi", "muli", "maxsi", "minsi", "andi", "ori", "xori")
UNARY = ("sqrt", "rsqrte", "negf", "extf", "truncf", "sitofp", "fptosi", "index_cast")
CMP_PREDS = {"cmpi": ("eq", "ne", "slt", "sle", "sgt", "sge"),
             "cmpf": ("oeq", "olt", "ole", "ogt", "oge", "one", "une", "ord", "uno",
                      "eq", "ne")}
ALU_OPS = ("add", "sub", "mul", "min", "max", "wrapneg", "trunc32", "clamp", "inrange", "cast")
REDUCE_KINDS = ("add", "max", "min")
STREAM_KINDS = ("reg", "ind", "mask", "mem", "vmem", "alu", "valu")

#: IR opcode -> instruction op, for the ops that map one to one
FROM_IR = {f"arith.{o}": o for o in FLOAT_BINARY + INT_BINARY + UNARY + (
    "cmpi", "cmpf", "select")}
FROM_IR.update({"arith.fma": "fma", "arith.constant": "const", "memref.dim": "dim",
                "memref.load": "load", "memref.store": "store", "memref.alloc": "alloc",
                "vector.maskedload": "maskedload", "vector.maskedstore": "maskedstore",
                "vector.broadcast": "broadcast", "vector.reduce": "reduce",
                "dlc.pop_operand": "pop", "slcv.from_buffer": "from_buffer",
                "slcv.mask": "vmask", "slcv.first_lane": "first_lane",
                "slcv.unique": "unique"})

# op -> (destinations, sources, immediates); None = variable
SHAPE: dict[str, tuple[int | None, int | None, int | None]] = {
    **{o: (1, 2, 0) for o in FLOAT_BINARY + INT_BINARY},
    **{o: (1, 1, 0) for o in UNARY},
    "fma": (1, 3, 0), "const": (1, 0, 1), "dim": (1, 1, 1), "cmpi": (1, 2, 1), "cmpf": (1, 2, 1),
    "select": (1, 3, 0), "load": (1, None, 0), "store": (0, None, 0),
    "maskedload": (1, None, 0), "maskedstore": (0, None, 0), "broadcast": (1, 1, 0),
    "reduce": (1, 1, 1), "alloc": (1, None, None), "for": (1, 3, 1), "if": (0, 1, 2),
    "mov": (1, 1, 0), "inc": (1, 0, 0), "pop": (1, 0, 0), "from_buffer": (1, 2, 0),
    "vmask": (1, 4, 0), "first_lane": (1, 1, 0), "unique": (3, 1, 0), "run": (0, 0, 1),
}

_CLASS = {
    **{o: "load" for o in ("load", "maskedload", "from_buffer", "pop")},
    "store": "store", "maskedstore": "store",
    **{o: "add" for o in ("addf", "subf", "negf", "addi", "subi", "andi", "ori", "xori")},
    **{o: "mul" for o in ("mulf", "divf", "sqrt", "rsqrte", "muli", "fma")},
    **{o: "max" for o in ("maxf", "minf", "maxsi", "minsi")},
    **{o: "convert" for o in ("extf", "truncf", "sitofp", "fptosi", "index_cast",
                              "broadcast", "first_lane")},
    "cmpf": "compare", "cmpi": "compare", "vmask": "compare", "select": "select",
    "for": "scalar", "if": "scalar", "inc": "scalar", "dim": "scalar", "alloc": "scalar",
}
FREE = ("const", "mov")
_INT_DTYPES = ("index", "i64", "i32", "i16", "i8", "i1")


def op_class(ins: Instr, regs: tuple[Reg, ...]) -> str | None:
    """The op class one execution of ``ins`` counts in (None: free). A ``for`` counts once
    per iteration (the caller counts iterations)."""
    if ins.op in FREE:
        return None
    if ins.op == "reduce":
        return "add" if ins.imm[0] == "add" else "max"
    cls = _CLASS.get(ins.op)
    if cls is None:
        raise ProgramError(f"{ins.op}: not an execute-unit instruction")
    if cls in ("add", "mul", "max", "compare", "select", "convert"):
        used = [regs[r] for r in ins.dst + ins.src]
        if all(r.cls == "s" and r.dtype in _INT_DTYPES for r in used):
            return "scalar"
    return cls


def check_shape(ins: Instr, where: str) -> None:
    """``ins`` has the operand counts its op requires (ProgramError otherwise)."""
    shape = SHAPE.get(ins.op)
    if shape is None:
        raise ProgramError(f"{where}: unknown instruction {ins.op!r}")
    for want, have, what in zip(shape, (len(ins.dst), len(ins.src), len(ins.imm)),
                                ("destinations", "sources", "immediates"), strict=True):
        if want is not None and want != have:
            raise ProgramError(f"{where}: {ins.op} takes {want} {what}, got {have}")


def body_length(code: tuple[Instr, ...] | list[Instr], i: int) -> int:
    """Number of records of the structured instruction at ``i`` including its bodies."""
    ins = code[i]
    if ins.op == "for":
        return 1 + int(ins.imm[0])
    if ins.op == "if":
        return 1 + int(ins.imm[0]) + int(ins.imm[1])
    return 1
