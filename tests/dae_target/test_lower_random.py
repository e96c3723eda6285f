"""Hypothesis: random clusters (kind, shapes incl. zero rows/lookups and D=1, combiner,
index mode, wrap_negative, index_bits, id/table/result/weight dtypes, grouped tables) lowered
to SLC must verify, print/parse to a fixed point and match the native kernel on XLA:CPU bit
for bit on random inputs and edge cases. 12 examples per default run (~10 s); the ``slow``
run draws 300."""

import pytest
import slc_specs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ember_xla.dae_target.check import check_spec, summary
from ember_xla.dae_target.lower.to_slc import lower_to_slc
from ember_xla.ir.parser import parse_module
from ember_xla.ir.printer import print_module
from ember_xla.ir.verify import verify_generic_module

INIT = {"sum": 0.0, "max": float("-inf"), "min": 7.0, "mean": -1.5, "sqrt_n": 0.0}


@st.composite
def clusters(draw):
    kind = draw(st.sampled_from(["segment_reduce", "padded_bag", "offsets_bag",
                                 "grouped_segment_reduce"]))
    k = draw(st.integers(1, 2)) if kind == "grouped_segment_reduce" else 1
    lookups = draw(st.integers(0, 9))
    mode = draw(st.sampled_from(["clip", "fill"]))
    tables = []
    for _ in range(k):
        n = draw(st.integers(1 if mode == "clip" else 0, 8))
        tdt = draw(st.sampled_from(["f32", "bf16", "f16"]))
        odt = draw(st.sampled_from([tdt, "f32"]))
        tables.append((n, draw(st.sampled_from([1, 2, 5])), tdt, odt))
    weights = None
    if kind != "grouped_segment_reduce" and draw(st.booleans()):
        weights = draw(st.sampled_from([tables[0][2], tables[0][3]]))
    combiner = draw(st.sampled_from(sorted(INIT)))
    return slc_specs.make_spec(
        kind, tables, lookups, draw(st.integers(1, 4)), combiner, mode, draw(st.booleans()),
        draw(st.sampled_from([32, 64])), draw(st.sampled_from(["s32", "s64"])), weights,
        draw(st.integers(1, 4)), INIT[combiner])


def _check(spec, seed):
    low = lower_to_slc(spec)
    verify_generic_module(low)
    text = print_module(low)
    assert print_module(parse_module(text)) == text
    res = check_spec(spec, low, rounds=1, seed=seed)
    assert res.ok, (spec, summary(res))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.integers(0, 2**31 - 1))
def test_random_clusters(spec, seed):
    _check(spec, seed)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.integers(0, 2**31 - 1))
def test_random_clusters_many(spec, seed):
    _check(spec, seed)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_shrink_keeps_the_form(spec):
    """check.shrink: same kind, attributes, dtypes and ranks, sizes within the limits; the
    shrunk cluster lowers and checks like any other."""
    from ember_xla.dae_target.check import shrink

    small = shrink(spec, rows=2, lookups=3, width=1, table_rows=2)
    assert (small.kind, small.attrs, small.roles) == (spec.kind, spec.attrs, spec.roles)
    for a, b in zip(small.operands, spec.operands, strict=True):
        assert a.dtype == b.dtype and len(a.shape) == len(b.shape)
        assert all(x <= y for x, y in zip(a.shape[:1], b.shape[:1], strict=True))
    assert all(o.shape[0] <= 2 and o.shape[1] <= 1 for o in small.outputs)
    _check(small, 0)
