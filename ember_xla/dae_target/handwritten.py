"""The hand-written DLC program of the sum embedding bag (offsets form): the "hand-written DAE
code" Ember compares its compiler against (cf. Ember's tests/eb_dlc.mlir), written op by op.

    out[b, :] = sum_{j in [offsets[b], offsets[b+1])} table[ids[j], :]

Access engine: TU ``b`` over the bags, TU ``j`` over the bag's lookups (bounds: two offset
mem_streams), vector TU ``k`` over a row in ``vl`` lanes whose contiguous row stream is indexed
by the chained id stream ``ids[j]``. Pushed: token 0 at ``begin`` of ``j`` (zero the output
row), the row buffer and token 1 at ``end`` of ``k`` (add the row), token 2 at ``iter`` of ``b``
(next output row). Core: the output row is the core variable ``row``, never sent in the queue.
The program's text form is the golden file tests/golden/dae/eb_handwritten_dlc.mlir.
"""

from __future__ import annotations

import ember_xla.dae_target.dialects  # noqa: F401  (registers the dialects)
from ember_xla.dae_target.dialects import arith, dlc, memref, scf, slc, slcv, vector
from ember_xla.dae_target.dialects.func import ReturnOp
from ember_xla.ir.block import Block
from ember_xla.ir.graph import Graph, Module
from ember_xla.ir.operation import Operation
from ember_xla.ir.types import F32, I1, INDEX, IntegerType, MemRefType, Type, VectorType
from ember_xla.ir.value import Value


class _B:
    """Appends typed ops to a block."""

    def __init__(self, block: Block) -> None:
        self.block = block

    def op(self, cls: type, operands: list[Value], types: list = (), **attrs) -> Operation:
        return self.block.append(cls.create(operands, list(types), attrs))

    def v(self, cls: type, operands: list[Value], t: Type, **attrs) -> Value:
        return self.op(cls, operands, [t], **attrs).result

    def const(self, value: object, t: Type = INDEX) -> Value:
        return self.v(arith.ConstantOp, [], t, value=value)


def sum_bag_dlc(vl: int = 8, id_bits: int = 32, dtype: Type = F32) -> Module:
    """The program; arguments ``(offsets: memref<?xindex>, ids: memref<?xiN>,
    table: memref<?x?xT>, out: memref<?x?xT>)``, ``num_inputs = 3``."""
    m = Module("eb_handwritten")
    args = [MemRefType((None,), INDEX), MemRefType((None,), IntegerType(id_bits)),
            MemRefType((None, None), dtype), MemRefType((None, None), dtype)]
    g = m.add(Graph("sum_bag", arg_types=args), entry=True)
    g.attributes["num_inputs"] = 3
    off, ids, table, out = g.args
    for a, n in zip(g.args, ("offsets", "ids", "table", "out"), strict=True):
        a.name_hint = n
    f = _B(g)
    c0, c1, cvl = f.const(0), f.const(1), f.const(vl)
    nb = f.v(arith.SubIOp, [f.v(memref.DimOp, [off], INDEX, dim=0), c1], INDEX)
    d = f.v(memref.DimOp, [table], INDEX, dim=1)
    vec, mask_t = VectorType((vl,), dtype), VectorType((vl,), I1)
    zero = f.const(0.0, vec)
    s0, s1, snb, sd = (f.v(slc.ToStreamOp, [x], slc.INDEX_STREAM) for x in (c0, c1, nb, d))

    conf = f.block.append(dlc.ConfigureOp.build())
    a = _B(conf.body)
    tb = a.block.append(dlc.NewTUOp.build(s0, snb, s1)).result
    b = a.v(dlc.GetIndVarOp, [tb], slc.INDEX_STREAM)
    start = a.v(slc.MemStreamOp, [off, b], slc.INDEX_STREAM)
    end = a.v(slc.MemStreamOp, [off, a.v(slc.AluStreamOp, [b, s1], slc.INDEX_STREAM,
                                         op="add")], slc.INDEX_STREAM)
    tj = a.block.append(dlc.NewTUOp.build(start, end, s1, parent=tb)).result
    j = a.v(dlc.GetIndVarOp, [tj], slc.INDEX_STREAM)
    i = a.v(slc.MemStreamOp, [ids, j], slc.StreamType.of(args[1].elem))
    tk = a.block.append(dlc.NewTUOp.build(s0, sd, s1, parent=tj, vl=vl)).result
    k = a.v(dlc.GetIndVarOp, [tk], slc.StreamType.of(VectorType((vl,), INDEX)))
    mk = a.v(dlc.GetMaskOp, [tk], slc.StreamType.of(mask_t))
    row = a.v(slcv.MemStreamOp, [table, i, k, mk], slc.StreamType.of(vec), contiguous=True)
    a.op(dlc.RegisterCallbackOp, [tj], event="begin", id=0)
    a.op(dlc.RegisterOperandOp, [tk, row], event="end")
    a.op(dlc.RegisterCallbackOp, [tk], event="end", id=1)
    a.op(dlc.RegisterCallbackOp, [tb], event="iter", id=2)

    loop = f.block.append(dlc.ComputeLoopOp.build([0, 1, 2], ["row"], [c0]))
    loop.results[0].name_hint = "rows"
    for case, body in ((0, "zero"), (1, "add")):
        cb = _B(loop.case(case))
        buf = cb.v(dlc.PopOperandOp, [], MemRefType((None,), dtype)) if body == "add" else None
        r = cb.v(dlc.GetVarOp, [], INDEX, name="row")
        sfor = cb.block.append(scf.ForOp.build(c0, d, cvl))
        sfor.body.args[0].name_hint = "c"
        lb = _B(sfor.body)
        c = sfor.body.args[0]
        msk = lb.v(slcv.MaskOp, [c, c0, d, c1], mask_t)
        val = zero
        if body == "add":
            cur = lb.v(vector.MaskedLoadOp, [out, r, c, msk, zero], vec)
            val = lb.v(arith.AddFOp, [cur, lb.v(slcv.FromBufferOp, [buf, c], vec)], vec)
        lb.op(vector.MaskedStoreOp, [out, r, c, msk, val])
        lb.op(scf.YieldOp, [])
        cb.op(dlc.YieldOp, [])
    inc = _B(loop.case(2))
    inc.op(dlc.IncrementVarOp, [], name="row")
    inc.op(dlc.YieldOp, [])
    f.op(ReturnOp, [])
    return m
