"""``queue-align`` on a decoupled program (DLC): the induction variable of a root traversal unit
with core-known ``lb`` and ``step`` stops travelling through the data queue.

Each ``dlc.register_operand`` of that induction variable is dropped, and the ``dlc.pop_operand``
that received it becomes ``dlc.get_var`` of a new core variable (init ``lb``); a new case
registered last at the TU's ``iter`` event bumps it (``dlc.increment_var`` when the step is 1).
Entries are matched to pops by the layout ``decouple`` writes (and the hand-written program
follows): the operands registered at one event of one TU right before a ``register_callback``
at the same event are the entries that case pops first, in order. A program that does not
follow it is left alone (reported)."""

from __future__ import annotations

from ember_xla.dae_target.dialects import arith, dlc
from ember_xla.dae_target.dialects.dlc_engine import plan
from ember_xla.dae_target.passes.slcv_util import constant_of, defined_inside
from ember_xla.ir.block import Block, Region
from ember_xla.ir.operation import Operation
from ember_xla.ir.rewriter import PatternRewriter
from ember_xla.ir.value import Value


def _core(s: Value, conf: Operation) -> Value | None:
    o = s.owner
    if isinstance(o, Operation) and o.opcode == "slc.to_stream" and not defined_inside(s, conf):
        return o.operands[0]
    return None


def _groups(conf: Operation) -> dict[Operation, int]:
    """``register_operand`` op -> the case id whose token follows it at the same event."""
    pending: dict[tuple[Value, str], list[Operation]] = {}
    out: dict[Operation, int] = {}
    for op in conf.body.ops:
        if op.opcode not in ("dlc.register_operand", "dlc.register_callback"):
            continue
        key = (op.operands[0], op.attributes["event"])
        if op.opcode == "dlc.register_operand":
            pending.setdefault(key, []).append(op)
        else:
            for r in pending.pop(key, []):
                out[r] = op.attributes["id"]
    if any(pending.values()):
        raise ValueError("operands registered without a token after them at their event")
    return out


def align_dlc(conf: Operation, loop: Operation, rw: PatternRewriter) -> int:
    """Align the root TUs of one configuration; returns the number of queue entries removed
    per TU iteration (0: nothing to do). ``ValueError`` says why it cannot."""
    removed = 0
    for root in plan(conf).roots:
        lb, step = _core(root.op.bounds[0], conf), _core(root.op.bounds[2], conf)
        regs = [op for op in conf.body.ops if op.opcode == "dlc.register_operand"
                and op.operands[1] in root.ind_vars]
        if not regs or root.vl is not None:
            continue
        if lb is None or step is None:
            raise ValueError("a root TU's lower bound or step is not a core value")
        owner = _groups(conf)
        cases = dict(zip(loop.cases, loop.regions, strict=True))
        name, k = "row", 0
        while name in loop.vars:
            k += 1
            name = f"row{k}"
        for reg in regs:
            case = cases[owner[reg]].block
            group = [r for r, c in owner.items() if c == owner[reg]]
            pops = [op for op in case.ops if op.opcode == "dlc.pop_operand"]
            if len(pops) < len(group):
                raise ValueError(f"case {owner[reg]} does not pop its entries at its top")
            pop = pops[sorted(group, key=conf.body.index_of).index(reg)]
            get = rw.insert_before(pop, dlc.GetVarOp.create([], [pop.result.type],
                                                            {"name": name}))
            rw.replace_op(pop, get.result)
            rw.erase(reg)
            removed += 1
        new_id = max(loop.cases, default=-1) + 1
        rw.append(conf.body, dlc.RegisterCallbackOp.create(
            [root.op.result], [], {"event": "iter", "id": new_id}))
        loop = _with_var(loop, name, lb, step, new_id, rw)
    return removed


def _with_var(loop: Operation, name: str, init: Value, step: Value, case_id: int,
              rw: PatternRewriter) -> Operation:
    """``loop`` rebuilt with one more core variable and a case bumping it by ``step``."""
    blocks = []
    for region in loop.regions:
        b = Block()
        anchor = b.append(dlc.YieldOp.create())
        rw.inline_block_before(region.block, anchor)
        rw.erase(anchor)
        blocks.append(b)
    bump = Block()
    if constant_of(step) == 1:
        bump.append(dlc.IncrementVarOp.create([], [], {"name": name}))
    else:
        cur = bump.append(dlc.GetVarOp.create([], [init.type], {"name": name})).result
        nxt = bump.append(arith.AddIOp.create([cur, step], [init.type])).result
        bump.append(dlc.SetVarOp.create([nxt], [], {"name": name}))
    bump.append(dlc.YieldOp.create())
    new = dlc.ComputeLoopOp.create(
        [*loop.operands, init], [*(r.type for r in loop.results), init.type],
        {"cases": [*loop.cases, case_id], "vars": [*loop.vars, name]},
        regions=[Region([b]) for b in [*blocks, bump]])
    rw.insert_before(loop, new)
    rw.replace_op(loop, list(new.results[:-1]))
    return new
