"""``dedup``: each distinct row of a batch is fetched once (beyond Ember; what TPU SparseCore
does). Runs on SLC (before ``vectorize``).

A candidate is a row stream ``v = slc.mem_stream(table, row, k)`` in a row loop ``for k``
whose row index ``row`` is computed from an id stream ``raw = slc.mem_stream(ids, at...)``
of the enclosing lookup loop ``for j`` through alu streams ending in ``clamp`` (so every id
gives a row inside the table, even ids the program never visits). The pass adds, before the
top-level loop nest:

    uniq, inv, count = slcv.unique(ids)          # access side: sort + unique the batch
    rows = memref.alloc(size(ids), D)            # core-side re-expansion buffer
    for u in [0, count):                         # fetch: one row per distinct id
      row' = <the same alu chain>(uniq[u])
      for k: callback { rows[u, k] = table[row', k] }

and in the lookup loop streams ``slot = inv[at...]`` instead of the row: the callbacks read
``rows[slot, k]`` where they read ``v``. The compute loop runs unchanged, in the same order,
on bit-identical row values, so every output is the same; the table elements loaded drop from
one per lookup to one per distinct id. Alu streams and the id stream left unused are erased."""

from __future__ import annotations

from typing import ClassVar

from ember_xla.dae_target.dialects import arith, memref, slc, slcv
from ember_xla.dae_target.passes.pattern_pass import ReportingPatternPass
from ember_xla.dae_target.passes.slcv_util import PassReport, defined_inside
from ember_xla.ir.graph import Graph, Module
from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import register_pass
from ember_xla.ir.rewriter import PatternRewriter, RewritePattern
from ember_xla.ir.types import INDEX, MemRefType
from ember_xla.ir.value import BlockArgument, OpResult, Value


class Refuse(Exception):
    """This row stream is not deduplicated (the message says why)."""


class _Done(Exception):
    """Not a candidate (nothing to report)."""


def _top_level(op: Operation) -> tuple[Graph, Operation]:
    """The function and the top-level op that contains ``op``."""
    while op.parent_op is not None:
        op = op.parent_op
    if not isinstance(op.parent, Graph):
        raise Refuse("not inside a function")
    return op.parent, op


def _visible_at(v: Value, graph: Graph, anchor: Operation) -> bool:
    if isinstance(v, BlockArgument):
        return v.owner is graph
    return v.owner.parent is graph and graph.index_of(v.owner) < graph.index_of(anchor)


def _chain(row: Value, lookups: Operation) -> tuple[Operation, list[Operation]]:
    """The id stream and the alu ops (in program order) from it to ``row``."""
    chain: list[Operation] = []
    v = row
    while isinstance(v, OpResult) and v.owner.opcode == "slc.alu_stream":
        op = v.owner
        if any(defined_inside(o, lookups) or o.defining_block is lookups.body
               for o in op.operands[1:]):
            raise Refuse("the row index mixes the id with other per-lookup values")
        chain.append(op)
        v = op.operands[0]
    if not (isinstance(v, OpResult) and v.owner.opcode == "slc.mem_stream"
            and v.owner.parent is lookups.body):
        raise Refuse("the row index is not computed from an id stream of the lookup loop")
    if not chain or chain[0].attributes.get("op") != "clamp":
        raise Refuse("the row index is not clamped (ids the program skips could be out of range)")
    return v.owner, chain[::-1]


class DedupRows(RewritePattern):
    def __init__(self, report: PassReport) -> None:
        self.report = report

    def match_and_rewrite(self, v: Operation, rw: PatternRewriter) -> None:
        rows_loop = v.parent_op
        if (v.opcode != "slc.mem_stream" or rows_loop is None or rows_loop.opcode != "slc.for"
                or len(v.operands) != 3 or v.operands[2] is not rows_loop.iv
                or not isinstance(v.operands[1], OpResult)):
            return  # not a row stream table[<computed row>, k]
        try:
            plan = self._plan(v, rows_loop)
        except _Done:
            return
        except Refuse as e:
            self.report.refuse(f"row stream of {v.operands[0].type}: {e}")
            return
        what = f"rows of {v.operands[0].type} fetched once per distinct id"
        self._rewrite(rw, v, rows_loop, *plan)
        self.report.change(what)

    def _plan(self, v: Operation, rows_loop: Operation) -> tuple:
        lookups = rows_loop.parent_op
        if lookups is None or lookups.opcode != "slc.for":
            raise Refuse("the row loop is not inside a lookup loop")
        raw, chain = _chain(v.operands[1], lookups)
        graph, anchor = _top_level(lookups)
        ids, table = raw.operands[0], v.operands[0]
        if isinstance(ids, OpResult) and ids.owner.opcode == "slcv.unique":
            raise _Done  # the fetch loop of an earlier rewrite
        needed = [ids, table, *rows_loop.operands[:3]]
        needed += [o for op in chain for o in op.operands[1:]]
        if not all(_visible_at(x, graph, anchor) for x in needed):
            raise Refuse("the ids, table, row bounds or index bounds are not function-level")
        for u in v.result.users:
            if u.opcode != "slc.from_stream":
                raise Refuse(f"the row stream feeds {u.opcode}")
        if rows_loop.init:
            raise Refuse("the row loop carries values")
        return raw, chain, anchor

    def _rewrite(self, rw: PatternRewriter, v: Operation, rows_loop: Operation,
                 raw: Operation, chain: list[Operation], anchor: Operation) -> None:
        ids, table = raw.operands[0], v.operands[0]
        it, tt = ids.type, table.type

        def before(op: Operation) -> Value | None:
            rw.insert_before(anchor, op)
            return op.results[0] if op.results else None

        uq = before(slcv.UniqueOp.create(
            [ids], [MemRefType((None,), it.elem), MemRefType((None,) * it.rank, INDEX),
                    slc.INDEX_STREAM]))
        uniq, inv, count = uq.owner.results
        size = before(memref.DimOp.create([ids], [INDEX], {"dim": 0}))
        for d in range(1, it.rank):
            dim = before(memref.DimOp.create([ids], [INDEX], {"dim": d}))
            size = before(arith.MulIOp.create([size, dim], [INDEX]))
        width = before(memref.DimOp.create([table], [INDEX], {"dim": 1}))
        rows = before(memref.AllocOp.create([size, width], [MemRefType((None, None), tt.elem)]))
        rows.name_hint = "rows"
        zero = before(slc.ToStreamOp.create(
            [before(arith.ConstantOp.create([], [INDEX], {"value": 0}))], [slc.INDEX_STREAM]))
        one = before(slc.ToStreamOp.create(
            [before(arith.ConstantOp.create([], [INDEX], {"value": 1}))], [slc.INDEX_STREAM]))
        before(self._fetch_loop(zero, count, one, uniq, chain, v, rows_loop, rows))
        # the lookup loop streams the slot of its id; callbacks read the fetched row
        slot = slc.MemStreamOp.create([inv, *raw.operands[1:]], [slc.INDEX_STREAM])
        rw.insert_after(raw, slot)
        for use in list(v.result.users):
            s = slc.FromStreamOp.create([slot.result], [INDEX])
            k = slc.FromStreamOp.create([rows_loop.iv], [INDEX])
            x = memref.LoadOp.create([rows, s.result, k.result], [tt.elem])
            for op in (s, k, x):
                rw.insert_before(use, op)
            rw.replace_op(use, x)
        rw.erase(v)
        for op in [*reversed(chain), raw]:
            if not op.result.uses:
                rw.erase(op)

    def _fetch_loop(self, zero: Value, count: Value, one: Value, uniq: Value,
                    chain: list[Operation], v: Operation, rows_loop: Operation,
                    rows: Value) -> Operation:
        """``for u in [0, count): for k: rows[u, k] = table[chain(uniq[u]), k]`` (built
        detached)."""
        fetch = slc.ForOp.build(zero, count, one, iv_name="u")
        body = fetch.body
        u = fetch.iv
        cur = body.append(slc.MemStreamOp.create([uniq, u], [slc.StreamType.of(
            uniq.type.elem)])).result
        for op in chain:
            cur = body.append(op.clone([cur, *op.operands[1:]])).result
        inner = body.append(slc.ForOp.build(*rows_loop.operands[:3], iv_name="k"))
        ib = inner.body
        row = ib.append(slc.MemStreamOp.create([v.operands[0], cur, inner.iv],
                                               [v.result.type])).result
        cb = ib.append(slc.CallbackOp.build())
        vals = [cb.body.append(slc.FromStreamOp.create([s], [s.type.elem])).result
                for s in (u, inner.iv, row)]
        cb.body.append(memref.StoreOp.create([vals[2], rows, vals[0], vals[1]]))
        cb.body.append(slc.YieldOp.create([]))
        ib.append(slc.YieldOp.create([]))
        body.append(slc.YieldOp.create([]))
        return fetch


@register_pass
class Dedup(ReportingPatternPass):
    """Fetch each distinct row once; re-expand on the core."""

    name: ClassVar[str] = "dedup"
    pattern = DedupRows

    def apply(self, module: Module) -> PassReport:
        if any(op.opcode.startswith("slcv.") for op in module.walk()):
            report = PassReport(self.name)
            report.refuse("the module is already vectorized: run dedup before vectorize")
            return report
        return super().apply(module)
