"""``emit_program``: a DLC-level module (the last stage of ``lower_cluster`` at -O0..-O4, or the
hand-written DLC) -> a ``DaeProgram`` (docs/DAE_PROGRAM.md). SSA values become registers,
``scf.for`` carried values and ``scf.if`` results become ``mov``s, each
``dlc.configure_access_engine`` + ``dlc.compute_loop`` pair becomes an engine run by a ``run``
instruction. Anything else is refused with a ``ProgramError`` naming the op."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ember_xla.dae.model import (
    Arg,
    DaeProgram,
    Engine,
    Instr,
    ProgramError,
    Reg,
    dtype_of,
    reg_of_type,
)
from ember_xla.dae.ops import FROM_IR
from ember_xla.dae.validate import validate
from ember_xla.dae_target.dialects.dlc_engine import EngineError, plan
from ember_xla.dae_target.dialects.slc import StreamType
from ember_xla.dae_target.program.engine_emit import emit_engine
from ember_xla.ir.block import Block
from ember_xla.ir.graph import Module
from ember_xla.ir.operation import Operation
from ember_xla.ir.types import MemRefType, VectorType
from ember_xla.ir.value import Value


def ident(name: str | None, default: str) -> str:
    """``name`` as a text-form identifier."""
    s = re.sub(r"[^A-Za-z0-9_.]", "_", name or "")
    return s if s and (s[0].isalpha() or s[0] == "_") else default


def where(op: Operation) -> str:
    return f"{op.opcode}{' %' + op.name if getattr(op, 'name', None) else ''}"


class Emitter:
    """Registers and instruction lists of one function."""

    def __init__(self) -> None:
        self.regs: list[Reg] = []
        self.reg_of: dict[Value, int] = {}
        self.engines: list[Engine] = []

    def new(self, reg: Reg) -> int:
        self.regs.append(reg)
        return len(self.regs) - 1

    def define(self, v: Value) -> int:
        t = v.type
        if isinstance(t, StreamType):  # a stream made on the core (slcv.unique's count)
            t = t.elem
        r = self.new(reg_of_type(t))
        self.reg_of[v] = r
        return r

    def use(self, v: Value, op: Operation) -> int:
        if v not in self.reg_of:
            raise ProgramError(f"{where(op)}: operand has no register (a stream used on the "
                               "core, or a value of another scope)")
        return self.reg_of[v]

    # -- blocks -------------------------------------------------------------------------
    def block(self, blk: Block, out: list[Instr], in_case: bool, nested: bool,
              var_regs: dict[str, int] | None = None) -> Operation | None:
        """Emit ``blk``'s ops into ``out``; returns its terminator (not emitted)."""
        ops = list(blk.ops)
        i = 0
        while i < len(ops):
            op = ops[i]
            code = op.opcode
            if code in ("func.return", "scf.yield", "dlc.yield"):
                if code == "func.return" and op.operands:
                    raise ProgramError("func.return: a lowered cluster returns no values")
                return op
            if code == "dlc.configure_access_engine":
                if in_case or nested or i + 1 >= len(ops) or \
                        ops[i + 1].opcode != "dlc.compute_loop":
                    raise ProgramError(f"{where(op)}: must be followed by its dlc.compute_loop "
                                       "at the top of the function")
                self.engine(op, ops[i + 1])
                out.append(Instr("run", (), (), (len(self.engines) - 1,)))
                i += 2
                continue
            self.op(op, out, in_case, nested, var_regs or {})
            i += 1
        return None

    def op(self, op: Operation, out: list[Instr], in_case: bool, nested: bool,
           var_regs: dict[str, int]) -> None:
        code = op.opcode
        use = [self.use(v, op) for v in op.operands] if code not in (
            "slc.to_stream",) else []
        if code == "slc.to_stream":  # a core value as a stream: the engine reads the register
            self.reg_of[op.result] = self.use(op.operands[0], op)
        elif code == "scf.for":
            self.for_(op, use, out, in_case, var_regs)
        elif code == "scf.if":
            self.if_(op, use, out, in_case, var_regs)
        elif code in ("dlc.get_var", "dlc.set_var", "dlc.increment_var"):
            name = op.attributes["name"]
            if name not in var_regs:
                raise ProgramError(f"{where(op)}: unknown core variable {name!r}")
            v = var_regs[name]
            if code == "dlc.get_var":
                out.append(Instr("mov", (self.define(op.result),), (v,)))
            elif code == "dlc.set_var":
                out.append(Instr("mov", (v,), (use[0],)))
            else:
                out.append(Instr("inc", (v,)))
        elif code in FROM_IR:
            name = FROM_IR[code]
            if name == "pop" and (not in_case or nested):
                raise ProgramError(f"{where(op)}: pops must be at the top level of a case")
            if name == "unique" and (in_case or nested):
                raise ProgramError(f"{where(op)}: slcv.unique only runs before an engine")
            dst = tuple(self.define(r) for r in op.results)
            out.append(Instr(name, dst, tuple(use), self.imms(op, name)))
        else:
            raise ProgramError(f"{where(op)}: not expressible in a DAE program")

    def imms(self, op: Operation, name: str) -> tuple:
        a = op.attributes
        if name == "const":
            v = a["value"]
            t = op.result.type
            el = t.elem if isinstance(t, VectorType) else t
            if isinstance(v, bool) or dtype_of(el) in ("i1",):
                return (int(bool(v)),)
            return (float(v),) if dtype_of(el).startswith(("f", "bf")) else (int(v),)
        if name == "dim":
            return (int(a["dim"]),)
        if name in ("cmpi", "cmpf"):
            return (str(a["pred"]),)
        if name == "reduce":
            return (str(a["kind"]),)
        if name == "alloc":
            t: MemRefType = op.result.type
            return tuple(-1 if d is None else int(d) for d in t.shape)
        return ()

    def for_(self, op: Operation, use: list[int], out: list[Instr], in_case: bool,
             var_regs: dict[str, int]) -> None:
        lb, ub, step, *init = use
        body = op.regions[0].block
        iv, *carried = (self.define(a) for a in body.args)
        for c, x in zip(carried, init, strict=True):
            out.append(Instr("mov", (c,), (x,)))
        head = len(out)
        out.append(Instr("for", (iv,), (lb, ub, step), (0,)))
        term = self.block(body, out, in_case, True, var_regs)
        ys = [self.use(v, term) for v in term.operands] if term is not None else []
        temps = [self.new(self.regs[c]) for c in carried]
        out.extend(Instr("mov", (t,), (y,)) for t, y in zip(temps, ys, strict=True))
        out.extend(Instr("mov", (c,), (t,)) for c, t in zip(carried, temps, strict=True))
        out[head] = Instr("for", (iv,), (lb, ub, step), (len(out) - head - 1,))
        for r, c in zip(op.results, carried, strict=True):
            out.append(Instr("mov", (self.define(r),), (c,)))

    def if_(self, op: Operation, use: list[int], out: list[Instr], in_case: bool,
            var_regs: dict[str, int]) -> None:
        results = [self.define(r) for r in op.results]
        head = len(out)
        out.append(Instr("if", (), (use[0],), (0, 0)))
        lens = []
        for region in op.regions:
            start = len(out)
            term = self.block(region.block, out, in_case, True, var_regs)
            ys = [self.use(v, term) for v in term.operands] if term is not None else []
            out.extend(Instr("mov", (r,), (y,)) for r, y in zip(results, ys, strict=True))
            lens.append(len(out) - start)
        if len(lens) == 1:
            if results:
                raise ProgramError(f"{where(op)}: an scf.if with results needs an else")
            lens.append(0)
        out[head] = Instr("if", (), (use[0],), tuple(lens))

    def engine(self, configure: Operation, loop: Operation) -> None:
        try:
            p = plan(configure)
        except EngineError as e:
            raise ProgramError(f"dlc.configure_access_engine: {e}") from None
        self.engines.append(emit_engine(self, configure, loop, p))


def emit_program(module: Module, input_shapes: Sequence[Sequence[int]] | None = None,
                 output_shapes: Sequence[Sequence[int]] | None = None) -> DaeProgram:
    """The DAE program of ``module``'s entry function (a DLC-level lowered cluster).
    ``input_shapes`` / ``output_shapes``: the argument shapes when known (default: the
    function's ``output_shapes`` attribute; unknown dims are -1: the binder folds sizes with
    the known ones, ``run_program`` takes missing output shapes as a parameter)."""
    import ember_xla.dae_target.dialects  # noqa: F401  (registers the dialects)

    g = module.entry
    if g is None:
        raise ProgramError(f"module {module.name} has no entry function")
    if "num_inputs" not in g.attributes:
        raise ProgramError(f"{g.name}: not a lowered cluster (no num_inputs attribute)")
    n_in = int(g.attributes["num_inputs"])
    n_out = len(g.args) - n_in
    shapes = output_shapes if output_shapes is not None else g.attributes.get("output_shapes")
    outs = [tuple(int(d) for d in s) for s in shapes] if shapes is not None else [None] * n_out
    if n_out < 0 or len(outs) != n_out:
        raise ProgramError(f"{g.name}: {len(g.args)} arguments for {n_in} inputs and "
                           f"{len(outs)} outputs")
    if input_shapes is not None and len(input_shapes) != n_in:
        raise ProgramError(f"{g.name}: {len(input_shapes)} input shapes for {n_in} inputs")
    inits = g.attributes.get("output_init") or [-1] * n_out
    if len(inits) != n_out:
        raise ProgramError(f"{g.name}: output_init names {len(inits)} outputs, it has {n_out}")
    em = Emitter()
    args = []
    for k, a in enumerate(g.args):
        if not isinstance(a.type, MemRefType):
            raise ProgramError(f"{g.name}: argument {k} is {a.type}, not a memref")
        r = em.define(a)
        known = (input_shapes[k] if input_shapes is not None else None) if k < n_in \
            else outs[k - n_in]
        shape = tuple(int(d) for d in known) if known is not None else (-1,) * a.type.rank
        if len(shape) != a.type.rank:
            raise ProgramError(f"{g.name}: argument {k} has rank {a.type.rank}, its shape "
                               f"{list(shape)} does not")
        init = int(inits[k - n_in]) if k >= n_in else -1
        args.append(Arg(ident(a.name_hint, f"arg{k}"), "in" if k < n_in else "out", r,
                        dtype_of(a.type.elem), shape, init))
    code: list[Instr] = []
    term = em.block(g, code, in_case=False, nested=False)
    if term is None:
        raise ProgramError(f"{g.name}: the function does not end in func.return")
    return validate(DaeProgram(ident(g.name, "cluster"), ident(g.attributes.get("kind"), "-"),
                               n_in, tuple(args), tuple(em.regs), tuple(em.engines),
                               tuple(code)))



def emit_cluster(spec: object, level: int | str = 3) -> DaeProgram:
    """Lower a ``ClusterSpec`` through ``-O<level>`` (or a pipeline ending in ``decouple``) and
    emit its DAE program with the spec's argument shapes (``LoweringRefused`` /
    ``ProgramError`` when it cannot be done)."""
    from ember_xla.dae_target.passes.levels import lower_cluster

    module = lower_cluster(spec, level)[-1][1]
    return emit_program(module, [a.shape for a in spec.operands])  # type: ignore[attr-defined]
