"""Calls built directly with jax.ffi.ffi_call (every attribute of the contract, including what
no rewrite produces: mean/sqrt_n, f32 results of bf16/f16 tables, explicit init, no
wrap_negative), lowered to SLC and checked against the native kernel on XLA:CPU."""

import ml_dtypes
import numpy as np
import pytest
from lowering_cases import DT, check_fn, ffi_fn

COMBINERS = ["sum", "max", "min", "mean", "sqrt_n"]
INIT = {"sum": 0.0, "max": float("-inf"), "min": 3.5, "mean": -1.0, "sqrt_n": 0.0}


def _bag_args(n, d, lk, b, dtype, id_dtype=np.int32, weights=None):
    args = [np.zeros((n, d), DT[dtype]), np.zeros(lk, id_dtype), np.zeros(b + 1, np.int32)]
    if weights is not None:
        args.append(np.zeros(lk, weights))
    return args


@pytest.mark.parametrize("combiner", COMBINERS)
@pytest.mark.parametrize("mode,wrap", [("clip", False), ("fill", True), ("fill", False)])
def test_offsets_bag_combiners_and_modes(combiner, mode, wrap):
    fn = ffi_fn("offsets_bag", [((4, 3), np.float32)], combiner=combiner, index_mode=mode,
                wrap_negative=wrap, init=INIT[combiner])
    check_fn(fn, _bag_args(6, 3, 10, 4, "f32"), expect={"combiner": combiner})


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("out,wtype", [("table", None), ("table", "table"), ("f32", None),
                                       ("f32", "table"), ("f32", "f32")])
def test_offsets_bag_dtypes_and_weights(dtype, out, wtype):
    """Accumulation in the result type, f32 for an f32 result; weights of T's type (bf16:
    product kept in f32, f16: rounded to f16) or of the result type."""
    otype = DT[dtype] if out == "table" else np.float32
    w = None if wtype is None else (DT[dtype] if wtype == "table" else np.float32)
    fn = ffi_fn("offsets_bag", [((3, 2), otype)], combiner="mean", weighted=w is not None,
                index_mode="fill", wrap_negative=True)
    check_fn(fn, _bag_args(5, 2, 8, 3, dtype, weights=w), expect={"weighted": w is not None})


@pytest.mark.parametrize("combiner", ["sum", "mean", "sqrt_n", "max"])
@pytest.mark.parametrize("out", ["bf16", "f32"])
def test_segment_reduce_f32_results_and_means(combiner, out):
    fn = ffi_fn("segment_reduce", [((4, 3), DT[out])], combiner=combiner, index_mode="fill",
                wrap_negative=True, init=INIT[combiner])
    args = [np.zeros((7, 3), ml_dtypes.bfloat16), np.zeros(9, np.int64), np.zeros(9, np.int32)]
    check_fn(fn, args, x64=True, expect={"combiner": combiner})


@pytest.mark.parametrize("bits", [32, 64])
def test_index_bits_with_s64_ids(bits):
    fn = ffi_fn("segment_reduce", [((3, 2), np.float32)], index_bits=bits, index_mode="fill")
    args = [np.zeros((5, 2), np.float32), np.zeros(8, np.int64), np.zeros(8, np.int64)]
    check_fn(fn, args, x64=True, expect={"index_bits": bits})


@pytest.mark.parametrize("combiner", ["mean", "sqrt_n"])
def test_padded_bag_means(combiner):
    fn = ffi_fn("padded_bag", [((4, 3), np.float32)], combiner=combiner, init=-1.0,
                index_mode="fill", wrap_negative=True)
    check_fn(fn, [np.zeros((6, 3), np.float32), np.zeros((4, 5), np.int32)])


def test_padded_bag_max_with_weights_f16():
    fn = ffi_fn("padded_bag", [((3, 4), np.float16)], combiner="max", weighted=True,
                init=float("-inf"), index_mode="fill", wrap_negative=True)
    args = [np.zeros((6, 4), np.float16), np.zeros((3, 5), np.int32), np.zeros((3, 5), np.float16)]
    check_fn(fn, args)


@pytest.mark.parametrize("case", ["no_lookups", "empty_table_fill", "d1"])
def test_edge_shapes(case):
    """(Zero bags: JAX folds a call with an empty result away; see test_slc_lowered.py.)"""
    n, d, lk, b = {"no_lookups": (4, 2, 0, 3),
                   "empty_table_fill": (0, 2, 5, 2), "d1": (5, 1, 7, 3)}[case]
    mode = "fill" if case == "empty_table_fill" else "clip"
    fn = ffi_fn("offsets_bag", [((b, d), np.float32)], combiner="mean", index_mode=mode,
                init=-2.0)
    check_fn(fn, _bag_args(n, d, lk, b, "f32"))


def test_grouped_call_direct():
    fn = ffi_fn("grouped_segment_reduce", [((3, 2), np.float32), ((2, 4), np.float32)],
                combiner="min", init=float("inf"), index_mode="fill", wrap_negative=True)
    args = [np.zeros((6, 2), np.float32), np.zeros(5, np.int32), np.zeros(5, np.int32),
            np.zeros((3, 4), ml_dtypes.bfloat16), np.zeros(4, np.int32), np.zeros(4, np.int32)]
    check_fn(fn, args)
