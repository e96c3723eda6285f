"""The C++ timing core gives exactly the Python reference's report (cycles, stalls, traffic,
hit rates) on traces of every granularity, on several targets, and the same refusals."""

import dataclasses as dc

import numpy as np
import pytest

from ember_xla.dae.errors import ProgramDoesNotFit
from ember_xla.emulator.synthetic import embedding_bag_trace
from ember_xla.emulator.timing import simulate
from ember_xla.emulator.timing_cc import simulate_fast
from ember_xla.machines.config import load_target

TMU, TINY = load_target("tmu"), load_target("tiny")


@pytest.mark.parametrize("target", [TMU, TINY], ids=["tmu", "tiny"])
@pytest.mark.parametrize("granularity", ["element", "chunk", "row"])
@pytest.mark.parametrize("rows,dim", [(50, 8), (100_000, 64), (1000, 3)])
def test_fast_core_equals_reference(target, granularity, rows, dim):
    rng = np.random.default_rng(rows + dim)
    lengths = rng.integers(0, 6, 24)                       # empty bags included
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    ids = rng.integers(0, rows, offsets[-1])
    tr = embedding_bag_trace(rows, dim, ids, offsets, granularity, vl=4)
    try:
        ref = simulate(target, tr)
    except ProgramDoesNotFit:   # a 256-byte row on tiny's 128-byte queue: both refuse
        with pytest.raises(ProgramDoesNotFit, match="does not fit"):
            simulate_fast(target, tr)
        return
    assert simulate_fast(target, tr) == ref


def test_fast_core_refuses_like_the_reference():
    tr = embedding_bag_trace(100, 64, np.array([1]), np.array([0, 1]))
    small = dc.replace(TMU, access=dc.replace(TMU.access, data_queue_bytes=1))
    with pytest.raises(ProgramDoesNotFit, match="does not fit"):
        simulate(small, tr)
    with pytest.raises(ProgramDoesNotFit, match="does not fit"):
        simulate_fast(small, tr)
