"""A model's clusters placed on the NPU (``placement/from_model.py``, ``run_model.py``): every
cluster kind the strategies can compute, with edge inputs (negative, out-of-range and 32-bit
wrapping ids, empty bags, segment ids outside the output, offsets not starting at 0), gives the
native kernel's outputs bit for bit under every plan (symmetric, greedy, ours, a reloaded plan
file); clusters they cannot compute are refused with the reason or run natively on request.
Cost: ~15 s (one XLA compile per case)."""

from __future__ import annotations

import numpy as np
import pytest
from helper_modules import load_helper

from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.machines.config import load_target
from ember_xla.orchestrate.place_model import emulate_placed, same_values
from ember_xla.placement.from_model import NotPlaceable

NPU = load_target("npu")


def _ffi_fn(*args, **kw):
    return load_helper("dae_target/lowering_cases.py").ffi_fn(*args, **kw)


def _module(fn, args):
    import jax

    with jax.enable_x64(True):  # s64 ids stay s64
        return from_jax(fn, *args).module


def _rng(seed=0):
    return np.random.default_rng(seed)


def seg_sum_fill_wrap():
    r = _rng(1)
    fn = _ffi_fn("segment_reduce", [((6, 16), np.float32)], index_mode="fill",
                 wrap_negative=True)
    return fn, [r.standard_normal((40, 16)).astype(np.float32),
                r.integers(-50, 50, 60).astype(np.int32),     # some < -40 or >= 40: NaN rows
                r.integers(-1, 7, 60).astype(np.int32)]       # -1 and 6: dropped


def seg_mean_clip_bits32():
    r = _rng(2)
    ids = r.integers(0, 30, 45).astype(np.int64)
    ids[:5] += 1 << 32                                        # truncated back into range
    ids[5:8] = [-3, 10**6, 31]                                # clipped
    fn = _ffi_fn("segment_reduce", [((9, 8), np.float32)], combiner="mean", index_bits=32,
                 init=-2.5)
    seg = np.sort(r.integers(0, 9, 45)).astype(np.int32)
    seg[seg == 4] = 3                                         # segment 4 empty: init
    return fn, [r.standard_normal((30, 8)).astype(np.float32), ids, seg]


def offsets_sum_fill():
    r = _rng(3)
    fn = _ffi_fn("offsets_bag", [((5, 24), np.float32)], index_mode="fill")
    ids = r.integers(0, 70, 40).astype(np.int32)
    ids[7] = 70                                               # out of range: a NaN bag
    off = np.array([3, 3, 10, 10, 25, 38], np.int32)          # starts at 3, two empty bags
    return fn, [r.standard_normal((70, 24)).astype(np.float32), ids, off]


def padded_mean_fill():
    r = _rng(4)
    fn = _ffi_fn("padded_bag", [((12, 32), np.float32)], combiner="mean", index_mode="fill",
                 wrap_negative=True)
    ids = r.integers(-100, 100, (12, 7)).astype(np.int32)
    return fn, [r.standard_normal((100, 32)).astype(np.float32), ids]


def grouped_sum():
    r = _rng(5)
    fn = _ffi_fn("grouped_segment_reduce", [((8, 16), np.float32), ((8, 4), np.float32)],
                 index_mode="fill")
    return fn, [r.standard_normal((50, 16)).astype(np.float32),
                r.integers(0, 50, 30).astype(np.int32), np.sort(r.integers(0, 8, 30)).astype(
                    np.int32),
                r.standard_normal((5, 4)).astype(np.float32),
                r.integers(0, 5, 20).astype(np.int32), r.integers(0, 8, 20).astype(np.int32)]


def grouped_concat_sum():
    fn0, args = grouped_sum()
    fn = _ffi_fn("grouped_segment_reduce_concat", [((8, 20), np.float32)], index_mode="fill")
    return fn, args


CASES = {f.__name__: f for f in (seg_sum_fill_wrap, seg_mean_clip_bits32, offsets_sum_fill,
                                 padded_mean_fill, grouped_sum, grouped_concat_sum)}


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request):
    fn, args = CASES[request.param]()
    return _module(fn, args), args


def test_every_plan_gives_the_native_outputs(case, tmp_path):
    module, args = case
    runs = {p: emulate_placed(module, module, args, NPU, p)
            for p in ("symmetric", "greedy", "auto")}
    for policy, run in runs.items():
        assert run.ok, (policy, run.verify)
        assert all(c["equal"] for c in run.verify["clusters_vs_native"])
    first = runs["symmetric"].cluster_outputs
    for run in runs.values():
        for name, outs in run.cluster_outputs.items():
            assert all(same_values(a, b) for a, b in zip(first[name], outs, strict=True))
    plan_file = tmp_path / "plan.json"
    runs["auto"].plan.save(plan_file)
    again = emulate_placed(module, module, args, NPU, str(plan_file))
    assert again.ok
    assert again.report.makespan_cycles == runs["auto"].report.makespan_cycles
    for name, outs in again.cluster_outputs.items():
        assert all(same_values(a, b) for a, b in zip(first[name], outs, strict=True))


def test_edge_values_reach_the_outputs():
    """The edge inputs above are not vacuous: NaN bags, init rows and dropped ids occur."""
    fn, args = seg_sum_fill_wrap()
    run = emulate_placed(*[_module(fn, args)] * 2, args, NPU, "greedy")
    out = run.cluster_outputs[next(iter(run.cluster_outputs))][0]
    assert np.isnan(out).any() and not np.isnan(out).all()
    fn, args = seg_mean_clip_bits32()
    run = emulate_placed(*[_module(fn, args)] * 2, args, NPU, "greedy")
    out = run.cluster_outputs[next(iter(run.cluster_outputs))][0]
    assert np.all(out[4] == np.float32(-2.5)) and run.ok


def max_and_sum():
    r = _rng(6)
    mx = _ffi_fn("segment_reduce", [((4, 8), np.float32)], combiner="max", init=float("-inf"))
    sm = _ffi_fn("segment_reduce", [((4, 8), np.float32)])

    def fn(t, i, s):
        return mx(t, i, s), sm(t, i, s)

    return fn, [r.standard_normal((10, 8)).astype(np.float32),
                r.integers(0, 10, 12).astype(np.int32), r.integers(0, 4, 12).astype(np.int32)]


def test_unplaceable_cluster_refused_or_run_natively():
    fn, args = max_and_sum()
    module = _module(fn, args)
    with pytest.raises(NotPlaceable, match="combiner max"):
        emulate_placed(module, module, args, NPU, "auto")
    run = emulate_placed(module, module, args, NPU, "auto", native_fallback=True)
    assert run.ok and len(run.clusters) == 1 and len(run.fallback) == 1
    assert "combiner max" in run.fallback[0][1] and "native kernel" in run.table()


def test_same_values_ignores_only_nan_payloads():
    a = np.array([1.0, np.nan], np.float32)
    b = a.copy()
    b.view(np.uint32)[1] |= 1                                 # another NaN payload
    assert same_values(a, b)
    assert not same_values(a, np.array([1.0, 2.0], np.float32))
    assert not same_values(a, np.array([np.nan, np.nan], np.float32))
    assert not same_values(np.float32([0.0]), np.float32([-0.0]))
