"""The slcv dialect: verifiers, the generic text form (print -> parse -> print fixed point on
modules that use every slcv op), and the interpreter's semantics and counters (tails, masked
lanes, gathers vs contiguous loads, row buffers, unique)."""

import numpy as np
import pytest
import slc_examples as E

from ember_xla.dae_target.dialects import arith, slc, slcv
from ember_xla.dae_target.dialects.func import ReturnOp
from ember_xla.dae_target.interp.run import make_interpreter
from ember_xla.dae_target.interp.slcv import SlcvFunctions
from ember_xla.ir.block import Block, Region
from ember_xla.ir.dialect import VerifyError
from ember_xla.ir.graph import Graph, Module
from ember_xla.ir.parser import parse_module
from ember_xla.ir.printer import print_module
from ember_xla.ir.types import F32, I1, I32, INDEX, MemRefType, VectorType
from ember_xla.ir.verify import verify_generic_module

S = slc.StreamType.of


def _all_ops_module() -> Module:
    m = E.embedding_bag("sum", weighted=True, clamp=True)
    E.apply_printed(m, "dedup,vectorize{vl=4},bufferize,simplify-mem,hoist")
    return m


def test_round_trip_fixed_point_uses_every_op():
    m = _all_ops_module()
    text = print_module(m)
    m2 = parse_module(text)
    assert print_module(m2) == text
    verify_generic_module(m2)
    used = {op.opcode for op in m2.walk() if op.opcode.startswith("slcv.")}
    assert used == {"slcv.for", "slcv.yield", "slcv.mem_stream", "slcv.buf_stream",
                    "slcv.to_buffer", "slcv.from_buffer", "slcv.mask", "slcv.unique"}
    assert all(type(op).__module__.endswith("dialects.slcv") for op in m2.walk()
               if op.opcode.startswith("slcv."))
    m3 = E.embedding_bag("sum", shifted=True)
    E.apply_printed(m3, "vectorize{vl=8}")
    t3 = print_module(m3)
    assert "slcv.first_lane" in t3 and "slcv.alu_stream" in t3
    assert print_module(parse_module(t3)) == t3


def _fn(*arg_types) -> tuple[Module, Graph]:
    m = Module("t")
    g = m.add(Graph("f", arg_types=list(arg_types)), entry=True)
    _add(g, ReturnOp.create([]))
    return m, g


def _add(g: Graph, op):
    """Insert ``op`` before the function's return."""
    return g.insert(len(g.ops) - 1, op)


def _loop(g: Graph, vl: int = 4, body_types=None) -> slcv.ForOp:
    c = _add(g, arith.ConstantOp.create([], [INDEX], {"value": 0})).result
    s = _add(g, slc.ToStreamOp.create([c], [S(INDEX)])).result
    body = Block(body_types or [S(VectorType((vl,), INDEX)), S(VectorType((vl,), I1))])
    body.append(slcv.YieldOp.create([]))
    return _add(g, slcv.ForOp.create([s, s, s], [], {"vl": vl, "config": "vector"},
                                      regions=[Region([body])]))


def test_for_verifier():
    m, g = _fn()
    _loop(g)
    verify_generic_module(m)
    m, g = _fn()
    _loop(g, 4, [S(VectorType((8,), INDEX)), S(VectorType((8,), I1))])
    with pytest.raises(VerifyError, match="body takes"):
        verify_generic_module(m)
    m, g = _fn()
    _loop(g).attributes["config"] = "diagonal"
    with pytest.raises(VerifyError, match="config"):
        verify_generic_module(m)


def _mem(loop, table, idx_last_vector=True, contiguous=False, vl=4):
    body = loop.body
    iv, mask = body.args
    c = loop.parent.ops[0].result
    row = loop.parent.insert(2, slc.ToStreamOp.create([c], [S(INDEX)])).result
    idx = [row, iv if idx_last_vector else row]
    op = slcv.MemStreamOp.create([table, *idx, mask], [S(VectorType((vl,), F32))],
                                 {"contiguous": True} if contiguous else {})
    body.insert(0, op)
    return op


def test_mem_stream_verifier():
    m, g = _fn(MemRefType((None, None), F32))
    _mem(_loop(g), g.args[0])
    verify_generic_module(m)
    m, g = _fn(MemRefType((None, None), F32))
    _mem(_loop(g), g.args[0], idx_last_vector=False, contiguous=True)
    with pytest.raises(VerifyError, match="contiguous"):
        verify_generic_module(m)
    m, g = _fn(MemRefType((None, None), F32))
    _mem(_loop(g, 8), g.args[0], vl=4)
    with pytest.raises(VerifyError, match="mask"):
        verify_generic_module(m)


def test_core_side_op_verifiers():
    m, g = _fn(MemRefType((None,), F32), MemRefType((None,), F32))
    i = _add(g, arith.ConstantOp.create([], [INDEX], {"value": 0})).result
    _add(g, slcv.MaskOp.create([i, i, i, i], [VectorType((4,), I1)]))
    _add(g, slcv.FromBufferOp.create([g.args[0], i], [VectorType((4,), F32)]))
    verify_generic_module(m)
    _add(g, slcv.FromBufferOp.create([g.args[0], i], [VectorType((4,), I32)]))
    with pytest.raises(VerifyError, match="from_buffer"):
        verify_generic_module(m)
    m, g = _fn(MemRefType((None,), F32))
    _add(g, slcv.UniqueOp.create([g.args[0]], [MemRefType((None,), F32),
                                                MemRefType((None,), INDEX), S(INDEX)]))
    with pytest.raises(VerifyError, match="integers"):
        verify_generic_module(m)


class _Op:
    """Just enough of an op for calling one implementation directly."""

    def __init__(self, result_type=None, **attrs):
        self.attributes = attrs
        self.regions = [None]
        self.result = type("R", (), {"type": result_type})()


def _interp():
    return make_interpreter(E.embedding_bag())


def test_for_runs_tails_with_a_mask():
    m, g = _fn(MemRefType((None,), I32))
    lanes = []
    impl = SlcvFunctions()
    interp = _interp()
    interp.run_region = lambda region, args: lanes.append(
        (args[0].tolist(), args[1].tolist())) or ()
    impl.for_(interp, _Op(vl=4), (np.int64(1), np.int64(8), np.int64(1)))
    assert lanes == [([1, 2, 3, 4], [True] * 4), ([5, 6, 7, 8], [True, True, True, False])]
    assert interp.counters["slcv.iterations"] == 2 and interp.counters["slcv.lanes"] == 7
    lanes.clear()
    impl.for_(interp, _Op(vl=4), (np.int64(0), np.int64(0), np.int64(1)))
    assert lanes == []


@pytest.mark.parametrize("contiguous", [False, True])
def test_mem_stream_masked_lanes_and_counts(contiguous):
    table = np.arange(20, dtype=np.float32).reshape(4, 5)
    op = slcv.MemStreamOp.create([], [])
    op.operands = [type("V", (), {"type": MemRefType((None, None), F32)})()]
    op.attributes = {"contiguous": contiguous}
    interp = _interp()
    iv, mask = np.array([4, 5, 6, 7]), np.array([True, False, False, False])
    (out,) = SlcvFunctions().mem_stream(interp, op, (table, np.int64(2), iv, mask))
    assert out.tolist() == [14.0, 0.0, 0.0, 0.0]
    iv, mask = np.array([1, 2, 3, 4]), np.ones(4, bool)
    (out,) = SlcvFunctions().mem_stream(interp, op, (table, np.int64(3), iv, mask))
    assert out.tolist() == [16.0, 17.0, 18.0, 19.0]
    c = interp.counters
    assert c["slcv.elements"] == 5 and c["slcv.bytes"] == 20 and c["slcv.vectors"] == 2
    assert c["slcv.contiguous" if contiguous else "slcv.gathers"] == 2
    with pytest.raises(Exception, match="out of bounds"):
        SlcvFunctions().mem_stream(interp, op, (table, np.int64(3), iv + 1, mask))


def test_contiguous_reads_consecutive_elements_whatever_the_lane_indices():
    """A wrongly marked gather gives different values: the equivalence checks can fail."""
    table = np.arange(10, dtype=np.float32).reshape(1, 10)
    op = slcv.MemStreamOp.create([], [])
    op.operands = [type("V", (), {"type": MemRefType((None, None), F32)})()]
    iv, mask = np.array([0, 2, 4, 6]), np.ones(4, bool)
    for contiguous, want in ((False, [0, 2, 4, 6]), (True, [0, 1, 2, 3])):
        op.attributes = {"contiguous": contiguous}
        (out,) = SlcvFunctions().mem_stream(_interp(), op, (table, np.int64(0), iv, mask))
        assert out.tolist() == want


def test_buffers_mask_first_lane_unique():
    impl, interp = SlcvFunctions(), _interp()
    (buf,) = impl.buf_stream(interp, _Op(S(MemRefType((None,), F32))), (np.int64(6),))
    impl.to_buffer(interp, None, (np.arange(4, dtype=np.float32) + 1, buf,
                                  np.array([4, 5, 6, 7]), np.array([1, 1, 0, 0], bool)))
    assert buf.tolist() == [0, 0, 0, 0, 1, 2]
    assert interp.counters["slcv.buffer_elements"] == 2
    (v,) = impl.from_buffer(interp, _Op(VectorType((4,), F32)), (buf, np.int64(3)))
    assert v.tolist() == [0, 1, 2, 0]
    (mk,) = impl.mask(interp, _Op(VectorType((4,), I1)), tuple(map(np.int64, (4, 0, 6, 1))))
    assert mk.tolist() == [True, True, False, False]
    (f,) = impl.first_lane(interp, _Op(INDEX), (np.array([7, 8, 9, 10]),))
    assert f == 7
    ids = np.array([[5, 1], [5, 3]], np.int32)
    uniq, inv, n = impl.unique(interp, None, (ids,))
    assert uniq.tolist() == [1, 3, 5] and n == 3 and uniq.dtype == np.int32
    assert (uniq[inv] == ids).all() and inv.shape == ids.shape
    assert interp.counters["slcv.unique_ids"] == 4 and interp.counters["slcv.unique_rows"] == 3
