"""Clusters of every kind as DLC programs for the emulator tests: the lowering test cases of
``tests/dae_target/pass_cases.py`` (loaded by path: the tests folder is not a package) plus a
few attribute combinations they lack, lowered through -O0..-O4 (cached per case and level)."""

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


pass_cases.CASES.update({
    "offsets_sqrtn_f16_s64_bits32": _offsets_sqrtn_f16_s64_bits32,
    "segment_min_weighted_wrap": _segment_min_weighted_wrap,
    "offsets_max_fill_f32": _offsets_max_fill_f32,
})
CASES = sorted(pass_cases.CASES)


@functools.cache
def _dlc_text(case: str, level: int) -> str:
    from ember_xla.dae_target.passes.levels import lower_cluster
    from ember_xla.ir.printer import print_module

    _, spec = pass_cases.lowered(case)
    return print_module(lower_cluster(spec, level)[-1][1])


def dlc(case: str, level: int):
    """(a fresh DLC module of ``case`` at ``-O<level>``, its ClusterSpec)."""
    from ember_xla.ir.parser import parse_module

    _, spec = pass_cases.lowered(case)
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
