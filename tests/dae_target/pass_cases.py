"""Shared helpers of the SLC/SLCV pass tests: a few clusters of every kind lowered to SLC from
real JAX functions (rewritten by ember-xla, lowered by ``lower/to_slc.py``), and an
equivalence check that runs the SLC function and a transformed one on the same random and
edge-case inputs (``dae_target.check.random_inputs``) and demands bit-identical outputs."""

from __future__ import annotations

import collections
import functools

import jax
import jax.numpy as jnp
import numpy as np
from lowering_cases import DT, arrays, ffi_fn, rewritten

from ember_xla.call_specs import cluster_spec, ember_calls
from ember_xla.dae_target.check import EDGE_CASES, random_inputs
from ember_xla.dae_target.interp.run import run_counted
from ember_xla.dae_target.lower.to_slc import lower_call
from ember_xla.ir.graph import Module
from ember_xla.ir.passes import parse_pipeline
from ember_xla.ir.printer import print_module


def _seg_sum_fill():
    t, i = arrays(7, 5, (9,), "f32")
    return (lambda t, i, s: jax.ops.segment_sum(jnp.take(t, i, axis=0), s, num_segments=4),
            (t, i, i.copy()))


def _seg_max_clip_bf16():
    t, i = arrays(6, 3, (8,), "bf16")
    return (lambda t, i, s: jax.ops.segment_max(jnp.take(t, i, axis=0, mode="clip"), s,
                                                num_segments=3), (t, i, i.copy()))


def _padded_sum_weighted():
    t, i = arrays(10, 9, (4, 3), "f32")
    w = np.zeros((4, 3), np.float32)
    return (lambda t, i, w: (t[i] * w[..., None]).sum(axis=1), (t, i, w))


def _padded_mean_d1():
    t, i = arrays(10, 1, (3, 5), "f32")
    return (lambda t, i: t[i].mean(axis=1), (t, i))


def _padded_sum_f16_d16():
    t, i = arrays(12, 16, (5, 2), "f16")
    return (lambda t, i: t[i].sum(axis=1), (t, i))


def _offsets_sum_fill_wrap():
    fn = ffi_fn("offsets_bag", [((4, 6), np.float32)], combiner="sum", index_mode="fill",
                wrap_negative=True)
    return fn, (np.zeros((7, 6), np.float32), np.zeros(10, np.int32), np.zeros(5, np.int32))


def _offsets_mean_bf16_weighted():
    fn = ffi_fn("offsets_bag", [((3, 5), np.float32)], combiner="mean", weighted=True,
                index_mode="clip")
    return fn, (np.zeros((6, 5), DT["bf16"]), np.zeros(8, np.int64), np.zeros(4, np.int32),
                np.zeros(8, np.float32))


def _grouped_fill():
    fn = ffi_fn("grouped_segment_reduce", [((4, 3), np.float32), ((4, 5), np.float32)],
                index_mode="fill")
    return fn, (np.zeros((6, 3), np.float32), np.zeros(7, np.int32), np.zeros(7, np.int32),
                np.zeros((9, 5), np.float32), np.zeros(5, np.int32), np.zeros(5, np.int32))


CASES = {
    "grouped_fill": _grouped_fill,
    "offsets_sum_fill_wrap": _offsets_sum_fill_wrap,
    "offsets_mean_bf16_weighted": _offsets_mean_bf16_weighted,
    "seg_sum_fill": _seg_sum_fill,
    "seg_max_clip_bf16": _seg_max_clip_bf16,
    "padded_sum_weighted": _padded_sum_weighted,
    "padded_mean_d1": _padded_mean_d1,
    "padded_sum_f16_d16": _padded_sum_f16_d16,
}


@functools.cache
def _lowered_text(make) -> tuple[str, object]:
    fn, args = make()
    (call,) = ember_calls(rewritten(fn, args))
    return print_module(lower_call(call)), cluster_spec(call)


def lowered(name: str, cases: dict | None = None) -> tuple[Module, object]:
    """A fresh SLC module of case ``name`` (of ``cases``, default ``CASES``) and its
    ClusterSpec."""
    from ember_xla.ir.parser import parse_module

    text, spec = _lowered_text((CASES if cases is None else cases)[name])
    return parse_module(text), spec


def apply(module: Module, pipeline: str) -> list:
    """Run ``pipeline`` on ``module`` in place, verifying after each pass; the reports."""
    from ember_xla.dae_target import passes  # noqa: F401  (registers the passes)
    from ember_xla.ir.verify import verify_generic_module

    reports = []
    for p in parse_pipeline(pipeline):
        reports.append(p.apply(module))
        verify_generic_module(module)
    return reports


def same(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit-identical (NaN payloads aside)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    fa, fb = a.astype(np.float64), b.astype(np.float64)
    return bool(np.array_equal(np.isnan(fa), np.isnan(fb))
                and np.array_equal(np.nan_to_num(fa, nan=0.0), np.nan_to_num(fb, nan=0.0)))


def equivalent(before: Module, after: Module, spec, rounds: int = 2,
               seed: int = 0) -> list[tuple[dict, dict]]:
    """Run both modules on ``rounds`` random inputs and every edge case; assert bit-identical
    outputs; returns the (before, after) interpreter counters of each run."""
    rng = np.random.default_rng(seed)
    counts = []
    for case in [None] * rounds + list(EDGE_CASES):
        inputs = random_inputs(spec, rng, case)
        want, c0 = run_counted(before, inputs)
        got, c1 = run_counted(after, inputs)
        for w, g in zip(want, got, strict=True):
            assert same(w, g), f"case {case}: outputs differ\n{w}\n{g}"
        counts.append((collections.Counter(c0), collections.Counter(c1)))
    return counts
