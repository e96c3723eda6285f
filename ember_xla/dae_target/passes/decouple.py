"""``decouple``: SLC/SLCV -> DLC. Each loop nest at the top of a function (a root ``slc.for`` /
``slcv.for``) becomes a ``dlc.configure_access_engine`` + ``dlc.compute_loop`` pair in its place.

- Loops become traversal units (``dlc.new_tu``, nested under their parent loop's TU; an
  ``slcv.for`` a vector TU with its ``vl``), induction variables and masks
  ``dlc.get_ind_var`` / ``dlc.get_mask``; stream ops move into the configuration
  (``slc.fwd_stream`` disappears: a stream is visible to nested TUs).
- Each callback becomes a case (ids 0, 1, ... in program order). Its event: after a nested loop
  -> ``end`` of that loop's TU; before the first nested loop -> ``begin`` of it; in a body
  without nested loops -> ``iter`` of the loop's TU. The streams it reads (``slc.from_stream``)
  are registered at the same event right before its token and popped (``dlc.pop_operand``) at
  the top of the case, in the same order; streams of core values (``slc.to_stream`` at the top
  of the function) are read on the core directly, not sent.
- Bufferized rows (``slcv.buf_stream`` filled by ``slcv.to_buffer`` in a vector loop) become the
  vector stream registered at the ``end`` of that loop's TU (the engine pushes the whole row).
- Values carried by the root loop (``init_args``, e.g. the output row counter after
  queue-align) become core variables: reads -> ``dlc.get_var``, the yield of the loop's last
  callback -> ``dlc.set_var`` (``dlc.increment_var`` for ``+ 1``); the loop's results -> the
  compute loop's results.
Nests it cannot express (core ops between streams, carried values in nested loops, callback
results used elsewhere, a row buffer read away from its loop's end) are left alone, with the
reason in the report."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from ember_xla.dae_target.dialects import dlc
from ember_xla.dae_target.dialects.dlc_engine import EngineError, plan
from ember_xla.dae_target.dialects.slc import StreamType
from ember_xla.dae_target.passes.slcv_util import (
    PassReport,
    constant_of,
    defined_inside,
    top_level,
)
from ember_xla.ir.block import Block, Region
from ember_xla.ir.graph import Module
from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import ModulePass, register_pass
from ember_xla.ir.rewriter import PatternRewriter
from ember_xla.ir.value import Value

LOOPS = ("slc.for", "slcv.for")
STREAM_OPS = ("slc.mem_stream", "slc.alu_stream", "slc.to_stream", "slcv.mem_stream")


class Refuse(Exception):
    """This nest cannot be decoupled (the message says why)."""


def _inside(v: Value, op: Operation) -> bool:
    return defined_inside(v, op)


@dataclasses.dataclass
class _Case:
    id: int
    block: Block
    callback: Operation
    yields: list[Value]  # the callback's yielded values, as cloned into the case


class _Nest:
    """Translation of one root loop nest (built detached; inserted only if it all works)."""

    def __init__(self, root: Operation, rw: PatternRewriter) -> None:
        self.root, self.rw = root, rw
        self.conf = dlc.ConfigureOp.build()
        self.vmap: dict[Value, Value] = {}
        self.bufs: dict[Value, tuple[Value, Value] | None] = {}  # buf_stream -> (tu, vals)
        self.cases: list[_Case] = []
        self.vars: dict[Value, str] = {}
        self.ids = {op: i for i, op in enumerate(
            o for o in root.walk() if o.opcode == "slc.callback")}

    def add(self, op: Operation) -> Operation:
        return self.conf.body.append(op)

    def stream(self, v: Value) -> Value:
        if v in self.vmap:
            return self.vmap[v]
        if _inside(v, self.root) or v.owner is self.root:
            raise Refuse(f"stream of {getattr(v.owner, 'opcode', 'a block')} is not available "
                         "to the access engine")
        return v

    def core_value(self, s: Value) -> Value | None:
        """The core value behind a top-level ``slc.to_stream`` (None for other streams)."""
        o = s.owner
        if isinstance(o, Operation) and o.opcode == "slc.to_stream" and not _inside(
                s, self.root):
            return o.operands[0]
        return None

    # -- loops ------------------------------------------------------------------------------
    def loop(self, loop: Operation, parent: Value | None, begin: list[Operation] = ()
             ) -> Value:
        """Translate ``loop`` into a TU under ``parent``; ``begin``: the callbacks that fire
        when it starts (registered right after the TU, before its body)."""
        vl = loop.attributes.get("vl") if loop.opcode == "slcv.for" else None
        lb, ub, step = (self.stream(v) for v in loop.operands[:3])
        tu = self.add(dlc.NewTUOp.build(lb, ub, step, parent, vl)).result
        args = loop.body.args
        iv = self.add(dlc.GetIndVarOp.create([tu], [args[0].type])).result
        iv.name_hint = args[0].name_hint
        self.vmap[args[0]] = iv
        n_fixed = 1
        if vl is not None:
            mask = self.add(dlc.GetMaskOp.create([tu], [args[1].type])).result
            self.vmap[args[1]] = mask
            n_fixed = 2
        carried = args[n_fixed:]
        if carried and parent is not None:
            raise Refuse("values carried by a nested loop")
        for cb in begin:
            self.callback(cb, tu, "begin", None)
        for i, a in enumerate(carried):
            self.vars[a] = a.name_hint or f"v{i}"
        last_child: tuple[Value, Operation] | None = None
        pending: list[Operation] = []
        for op in loop.body.ops:
            if op.opcode in LOOPS:
                child = self.loop(op, tu, pending)
                pending, last_child = [], (child, op)
            elif op.opcode == "slc.callback":
                if last_child is not None:
                    self.callback(op, last_child[0], "end", last_child[1])
                else:
                    pending.append(op)
            elif op.opcode in STREAM_OPS:
                operands = []
                for v in op.operands:
                    if isinstance(v.type, StreamType):
                        operands.append(self.stream(v))
                    elif _inside(v, self.root):
                        raise Refuse(f"{op.opcode} reads a core value computed in the nest")
                    else:
                        operands.append(v)
                new = self.add(op.clone(operands))
                for old, r in zip(op.results, new.results, strict=True):
                    self.vmap[old] = r
            elif op.opcode == "slc.fwd_stream":
                self.vmap[op.result] = self.stream(op.operands[0])
            elif op.opcode == "slcv.buf_stream":
                self.bufs[op.result] = None
            elif op.opcode == "slcv.to_buffer":
                self.to_buffer(op, loop, tu)
            elif op.opcode in ("slc.yield", "slcv.yield"):
                pass  # after the callbacks still pending (below)
            else:
                raise Refuse(f"{op.opcode} in a loop body is neither a stream nor a callback")
        for cb in pending:
            self.callback(cb, tu, "iter", None)
        self.loop_yield(loop.body.ops[-1], carried)
        return tu

    def to_buffer(self, op: Operation, loop: Operation, tu: Value) -> None:
        vals, buf, iv, mask = op.operands
        if loop.opcode != "slcv.for" or iv is not loop.body.args[0] or \
                mask is not loop.body.args[1]:
            raise Refuse("slcv.to_buffer not at its vector loop's induction variable")
        if buf not in self.bufs or self.bufs[buf] is not None:
            raise Refuse("a row buffer filled twice or from another loop")
        if buf.owner.operands[0] is not loop.operands[1]:
            raise Refuse("a row buffer whose size is not its loop's upper bound")
        self.bufs[buf] = (tu, self.stream(vals))

    # -- callbacks --------------------------------------------------------------------------
    def callback(self, cb: Operation, tu: Value, event: str, after: Operation | None) -> None:
        case_id = self.ids[cb]
        block = Block()
        reads: dict[Value, Value] = {}
        sent: list[Value] = []
        for op in cb.walk():
            for v in op.operands:
                if op.opcode == "slc.from_stream" or not _inside(v, self.root):
                    continue
                if v in self.vars:
                    continue
                if _inside(v, cb):
                    continue
                raise Refuse(f"a callback reads {getattr(v.owner, 'opcode', 'a value')} "
                             "computed elsewhere in the nest")
            if op.opcode != "slc.from_stream":
                continue
            s = op.operands[0]
            if s in reads or s in sent:
                continue
            core = self.core_value(s)
            if core is not None:
                reads[s] = core
                continue
            if s in self.bufs:
                entry = self.bufs[s]
                if entry is None or entry[0] is not tu or event != "end":
                    raise Refuse("a row buffer read away from the end of its vector loop")
                self.add(dlc.RegisterOperandOp.create([tu, entry[1]], [], {"event": "end"}))
            else:
                self.add(dlc.RegisterOperandOp.create([tu, self.stream(s)], [],
                                                      {"event": event}))
            sent.append(s)
        self.add(dlc.RegisterCallbackOp.create([tu], [], {"event": event, "id": case_id}))
        for s in sent:
            reads[s] = block.append(dlc.PopOperandOp.create([], [s.type.elem])).result
        vmap: dict[Value, Value] = {}
        used_vars = {v for op in cb.walk() for v in op.operands if v in self.vars}
        for a in self.vars:
            if a in used_vars:
                vmap[a] = block.append(dlc.GetVarOp.create([], [a.type],
                                                           {"name": self.vars[a]})).result
        body = cb.body
        for op in body.ops[:-1]:
            block.append(op.clone(value_map=vmap))
        yields = [vmap.get(v, v) for v in body.ops[-1].operands]
        for op in list(block.walk()):
            if op.opcode == "slc.from_stream":
                self.rw.replace_op(op, reads[op.operands[0]])
        block.append(dlc.YieldOp.create())
        self.cases.append(_Case(case_id, block, cb, yields))

    def loop_yield(self, op: Operation, carried: list[Value]) -> None:
        if not carried:
            return
        last = max(self.cases, key=lambda c: c.id) if self.cases else None
        for a, v in zip(carried, op.operands, strict=True):
            if v is a:
                continue
            if last is None or v.owner is not last.callback or any(
                    o.opcode in LOOPS or o.opcode == "slc.callback"
                    for o in op.parent.ops[op.parent.index_of(v.owner) + 1:]):
                raise Refuse("a carried value not yielded by the loop's last callback")
            self.set_var(last, self.vars[a], last.yields[v.index])

    def set_var(self, case: _Case, name: str, v: Value) -> None:
        term = case.block.ops[-1]
        o = v.owner
        if isinstance(o, Operation) and o.opcode == "arith.addi":
            x, y = o.operands
            for a, b in ((x, y), (y, x)):
                if isinstance(a.owner, Operation) and a.owner.opcode == "dlc.get_var" and \
                        a.owner.attributes["name"] == name and constant_of(b) == 1:
                    self.rw.insert_before(term, dlc.IncrementVarOp.create([], [], {"name": name}))
                    if not o.results[0].uses:
                        self.rw.erase(o)
                        if not a.uses:
                            self.rw.erase(a.owner)
                    return
        self.rw.insert_before(term, dlc.SetVarOp.create([v], [], {"name": name}))


def decouple_nest(root: Operation, rw: PatternRewriter) -> int:
    """Replace root loop ``root`` by its DLC form; returns the number of cases."""
    nest = _Nest(root, rw)
    try:
        nest.loop(root, None)
        try:
            plan(nest.conf)
        except EngineError as e:
            raise Refuse(str(e)) from None
    except Refuse:
        nest.conf.drop_all_references()
        for c in nest.cases:
            for op in c.block.ops:
                op.drop_all_references()
        raise
    nest.cases.sort(key=lambda c: c.id)
    init = list(root.operands[3:])
    names = list(nest.vars.values())
    loop = dlc.ComputeLoopOp.create(init, [v.type for v in init],
                                    {"cases": [c.id for c in nest.cases], "vars": names},
                                    regions=[Region([c.block]) for c in nest.cases])
    for old, new in zip(root.results, loop.results, strict=True):
        new.name_hint = old.name_hint
    rw.insert_before(root, nest.conf)
    rw.insert_before(root, loop)
    rw.replace_op(root, list(loop.results))
    return len(nest.cases)


@register_pass
@dataclasses.dataclass(frozen=True)
class Decouple(ModulePass):
    """SLC/SLCV loop nests -> DLC access-engine configuration + compute loop."""

    name: ClassVar[str] = "decouple"

    def apply(self, module: Module) -> PassReport:
        report = PassReport("decouple")
        rw = PatternRewriter()
        for g in module.graphs:
            for op in top_level(g, LOOPS):
                try:
                    n = decouple_nest(op, rw)
                except Refuse as e:
                    report.refuse(f"{op.opcode} nest in @{g.name}: {e}")
                    continue
                report.change(f"{op.opcode} nest in @{g.name} -> access engine + compute loop "
                              f"with {n} case(s)")
            for op in g.walk():
                if op.opcode == "slc.callback" and op.parent_op is None:
                    report.refuse(f"slc.callback outside any loop in @{g.name}")
        return report
