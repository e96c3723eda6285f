"""The execute-side dialects (func, arith, scf, memref, vector): one rounding per op in the
op's type, XLA's NaN-propagating max/min, integer wrap-around, casts, loops, bounds-checked
memory, masked vector memory, and verifier rules."""

import ml_dtypes
import numpy as np
import pytest

import ember_xla.dae_target.dialects  # noqa: F401
from ember_xla.dae_target.dialects import arith, memref, scf, vector
from ember_xla.dae_target.dialects.func import ReturnOp
from ember_xla.dae_target.interp.execute import ExecuteFunctions
from ember_xla.ir.dialect import VerifyError
from ember_xla.ir.graph import Graph, Module
from ember_xla.ir.interpreter import Interpreter, InterpretError
from ember_xla.ir.types import BF16, F16, F32, I1, I32, I64, INDEX, MemRefType, VectorType
from ember_xla.ir.verify import verify_generic_module


def _fn(arg_types, build):
    """A one-function module; ``build(graph, *args)`` returns the values to return."""
    m = Module("t")
    g = m.add(Graph("f", arg_types=arg_types), entry=True)
    outs = build(g, *g.args)
    g.append(ReturnOp.create(list(outs)))
    verify_generic_module(m)
    return m


def _run(m, *args):
    return Interpreter([ExecuteFunctions()]).run_graph(m.entry, list(args))


def _op(g, cls, operands, t=None, **attrs):
    return g.append(cls.create(operands, [t] if t is not None else [], attrs or None))


@pytest.mark.parametrize("t,dt", [(BF16, ml_dtypes.bfloat16), (F16, np.float16), (F32, np.float32)])
def test_float_ops_round_once_in_their_type(t, dt):
    m = _fn([t, t], lambda g, a, b: [_op(g, cls, [a, b], t).result for cls in
                                     (arith.AddFOp, arith.MulFOp, arith.DivFOp)])
    a, b = dt(1.0078125), dt(3.0)
    add, mul, div = _run(m, a, b)
    assert type(add) is type(a)
    assert add == dt(np.float64(a) + np.float64(b)) and mul == dt(np.float64(a) * 3)
    assert div == dt(np.float64(a) / 3)


def test_max_min_follow_xla():
    m = _fn([F32, F32], lambda g, a, b: [_op(g, arith.MaxFOp, [a, b], F32).result,
                                         _op(g, arith.MinFOp, [a, b], F32).result])
    nan = np.float32("nan")
    assert all(np.isnan(x) for x in _run(m, nan, np.float32(1)))
    assert all(np.isnan(x) for x in _run(m, np.float32(1), nan))
    mx, mn = _run(m, np.float32(-0.0), np.float32(0.0))
    assert not np.signbit(mx) and np.signbit(mn)


def test_integer_wraparound_and_casts():
    def build(g, a, f):
        big = _op(g, arith.ConstantOp, [], I32, value=2**31 - 1).result
        s = _op(g, arith.AddIOp, [a, big], I32).result
        to_index = _op(g, arith.IndexCastOp, [s], INDEX).result
        fi = _op(g, arith.FPToSIOp, [f], I64).result
        tr = _op(g, arith.TruncFOp, [f], BF16).result
        return [s, to_index, fi, tr]

    m = _fn([I32, F32], build)
    s, idx, fi, tr = _run(m, np.int32(1), np.float32(-2.75))
    assert s == np.int32(-2**31) and idx == -2**31 and fi == -2
    assert tr == ml_dtypes.bfloat16(-2.75)


def test_scf_for_with_carried_values_and_if():
    def build(g, n):
        c0 = _op(g, arith.ConstantOp, [], INDEX, value=0).result
        c1 = _op(g, arith.ConstantOp, [], INDEX, value=1).result
        loop = g.append(scf.ForOp.build(c0, n, c1, [c0]))
        i, acc = loop.body.args
        cond = loop.body.append(arith.CmpIOp.create([i, c1], [I1], {"pred": "sge"}))
        branch = loop.body.append(scf.IfOp.build(cond.result, [INDEX]))
        branch.then_block.append(scf.YieldOp.create([i]))
        branch.else_block.append(scf.YieldOp.create([c0]))
        nxt = loop.body.append(arith.AddIOp.create([acc, branch.result], [INDEX]))
        loop.body.append(scf.YieldOp.create([nxt.result]))
        return [loop.result]

    (total,) = _run(_fn([INDEX], build), np.int64(5))
    assert total == 1 + 2 + 3 + 4


def test_memory_is_bounds_checked():
    def build(g, m, i):
        return [_op(g, memref.LoadOp, [m, i], F32).result]

    m = _fn([MemRefType((None,), F32), INDEX], build)
    buf = np.arange(3, dtype=np.float32)
    assert _run(m, buf, np.int64(2)) == (2.0,)
    with pytest.raises(InterpretError, match="out of bounds"):
        _run(m, buf, np.int64(-1))


def test_masked_vector_load_store_skip_masked_lanes():
    v4 = VectorType((4,), F32)
    m4 = VectorType((4,), I1)

    def build(g, src, dst, i, mask):
        zero = _op(g, arith.ConstantOp, [], v4, value=0.0).result
        v = _op(g, vector.MaskedLoadOp, [src, i, mask, zero], v4).result
        two = _op(g, vector.BroadcastOp, [_op(g, arith.ConstantOp, [], F32, value=2.0).result],
                  v4).result
        _op(g, vector.MaskedStoreOp, [dst, i, mask, _op(g, arith.MulFOp, [v, two], v4).result])
        return [_op(g, vector.ReduceOp, [v], F32, kind="add").result]

    m = _fn([MemRefType((None,), F32), MemRefType((None,), F32), INDEX, m4], build)
    src = np.arange(6, dtype=np.float32)
    dst = np.zeros(6, np.float32)
    (s,) = _run(m, src, dst, np.int64(4), np.array([True, True, False, False]))
    assert s == 4 + 5 and list(dst) == [0, 0, 0, 0, 8, 10]


@pytest.mark.parametrize("bad", ["mixed_types", "bad_pred", "store_type", "cast_shape"])
def test_verifier_rules(bad):
    def build(g, a, b, m):
        if bad == "mixed_types":
            _op(g, arith.AddFOp, [a, b], F32)
        elif bad == "bad_pred":
            _op(g, arith.CmpFOp, [a, a], I1, pred="slt")
        elif bad == "store_type":
            _op(g, memref.StoreOp, [b, m, _op(g, arith.ConstantOp, [], INDEX, value=0).result])
        else:
            _op(g, arith.ExtFOp, [b], VectorType((2,), F32))
        return []

    with pytest.raises(VerifyError):
        _fn([F32, F16, MemRefType((None,), F32)], build)
