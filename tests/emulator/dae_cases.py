"""Clusters of every kind as DLC programs for the emulator tests: the lowering test cases of
``tests/dae_target/pass_cases.py`` (loaded by path: the tests folder is not a package) plus a
few attribute combinations they lack and the fused Adagrad updates and the ordered scatter
(called directly), lowered through -O0..-O4 (cached per case and level)."""

from __future__ import annotations

import functools

import numpy as np
from helper_modules import load_helper

lowering_cases = load_helper("dae_target/lowering_cases.py")
pass_cases = load_helper("dae_target/pass_cases.py")
slc_examples = load_helper("dae_target/slc_examples.py")


def _offsets_sqrtn_f16_s64_bits32():
    fn = lowering_cases.ffi_fn("offsets_bag", [((3, 4), np.float16)], combiner="sqrt_n",
                               index_mode="clip", index_bits=32)
    return fn, (np.zeros((5, 4), np.float16), np.zeros(7, np.int64), np.zeros(4, np.int64))


def _segment_min_weighted_wrap():
    fn = lowering_cases.ffi_fn("segment_reduce", [((3, 6), np.float32)], combiner="min",
                               weighted=True, wrap_negative=True, index_mode="clip",
                               init=float("inf"))
    return fn, (np.zeros((8, 6), np.float32), np.zeros(9, np.int32), np.zeros(9, np.int32),
                np.zeros(9, np.float32))


def _offsets_max_fill_f32():
    fn = lowering_cases.ffi_fn("offsets_bag", [((4, 9), np.float32)], combiner="max",
                               index_mode="fill", init=float("-inf"))
    return fn, (np.zeros((6, 9), np.float32), np.zeros(10, np.int32), np.zeros(5, np.int32))


def _backward(kind: str, outs: list[tuple[tuple[int, ...], object]], args: tuple, **attrs):
    """A backward ``ember.<kind>`` call made directly (its own attributes only)."""
    import jax

    from ember_xla.custom_calls import target_of_kind
    from ember_xla.native import register_targets

    register_targets()
    shapes = [jax.ShapeDtypeStruct(s, d) for s, d in outs]
    call = jax.ffi.ffi_call(target_of_kind(kind).name, shapes if len(shapes) > 1 else shapes[0])
    return (lambda *a: call(*a, **attrs)), args


def _f32(*shape):
    return np.zeros(shape, np.float32)


def _sparse_adagrad_gathered():
    # table, accumulator, indices, source, scale, eps, source_rows, mask
    return _backward("sparse_adagrad", [((9, 5), np.float32)] * 2,
                     (_f32(9, 5), _f32(9, 5), np.zeros(12, np.int32), _f32(4, 5), _f32(),
                      _f32(), np.zeros(12, np.int32), np.zeros(12, bool)))


def _rowwise_blocked16_folded():
    return _backward("sparse_rowwise_adagrad", [((7, 16), np.float32), ((7,), np.float32)],
                     (_f32(7, 16), _f32(7), np.zeros(10, np.int32), _f32(10, 16), _f32(),
                      _f32()), lr_folded=True, sum_order="blocked16")


def _rowwise_sequential_d5():
    return _backward("sparse_rowwise_adagrad", [((6, 5), np.float32), ((6,), np.float32)],
                     (_f32(6, 5), _f32(6), np.zeros(9, np.int64), _f32(9, 5), _f32(),
                      _f32()), lr_folded=False, sum_order="sequential")


def _ordered_scatter_subtract():
    return _backward("ordered_scatter", [((8, 6), np.float32)],
                     (_f32(8, 6), np.zeros(11, np.int32), _f32(11, 6)), combiner="subtract")


#: pass_cases' cases and these (its own dict stays as it is: the pass tests parametrize on it)
ALL_CASES = {**pass_cases.CASES, **{
    "sparse_adagrad_gathered": _sparse_adagrad_gathered,
    "rowwise_blocked16_folded": _rowwise_blocked16_folded,
    "rowwise_sequential_d5": _rowwise_sequential_d5,
    "ordered_scatter_subtract": _ordered_scatter_subtract,
    "offsets_sqrtn_f16_s64_bits32": _offsets_sqrtn_f16_s64_bits32,
    "segment_min_weighted_wrap": _segment_min_weighted_wrap,
    "offsets_max_fill_f32": _offsets_max_fill_f32,
}}
CASES = sorted(ALL_CASES)


def lowered(case: str):
    """(a fresh SLC module of ``case``, its ClusterSpec)."""
    return pass_cases.lowered(case, ALL_CASES)


@functools.cache
def _dlc_text(case: str, level: int) -> str:
    from ember_xla.dae_target.passes.levels import lower_cluster
    from ember_xla.ir.printer import print_module

    _, spec = lowered(case)
    return print_module(lower_cluster(spec, level)[-1][1])


def dlc(case: str, level: int):
    """(a fresh DLC module of ``case`` at ``-O<level>``, its ClusterSpec)."""
    from ember_xla.ir.parser import parse_module

    _, spec = lowered(case)
    return parse_module(_dlc_text(case, level)), spec


TRACE_FIELDS = ("kind", "a", "b", "c", "layer", "queued")


def assert_same_trace(got, want) -> None:
    """Two executors' traces: event for event, with the same case costs."""
    for f in TRACE_FIELDS:
        assert getattr(got, f) == getattr(want, f), f"trace field {f} differs"
    assert got.cases == want.cases


def assert_same_timing(want_report, got_report, targets) -> None:
    """``want_report(target)`` and ``got_report(target)`` give equal timing reports on every
    target, or both raise ``ProgramDoesNotFit``."""
    import pytest

    from ember_xla.dae.errors import ProgramDoesNotFit

    for target in targets:
        try:
            want = want_report(target)
        except ProgramDoesNotFit:
            with pytest.raises(ProgramDoesNotFit):
                got_report(target)
            continue
        assert got_report(target) == want
