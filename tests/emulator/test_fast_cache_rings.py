"""The C++ timing core's cache sets (rings in recency order) and its lookups compiled per
target's ways against the Python reference: one to four levels of power-of-two sets with 4, 8
and 16 ways (each combination the core compiles a lookup for) and with other ways (the general
lookup), traces whose lines hit at every recency position of their sets (a skewed choice from a
pool a little larger than the caches), many seeds — reports equal field for field."""

import dataclasses as dc
import itertools

import numpy as np
import pytest

from ember_xla.emulator.timing import simulate
from ember_xla.emulator.timing_cc import simulate_fast
from ember_xla.emulator.trace import Trace
from ember_xla.machines.config import load_target

TMU = load_target("tmu")
LINE = TMU.caches[0].line_bytes


def with_caches(ways: tuple[int, ...], sets: tuple[int, ...]):
    caches = tuple(dc.replace(TMU.caches[i % len(TMU.caches)], name=f"C{i}",
                              size_bytes=s * w * LINE, associativity=w,
                              latency_cycles=3 * (i + 1), shared=i == len(ways) - 1)
                   for i, (w, s) in enumerate(zip(ways, sets, strict=True)))
    return dc.replace(TMU, caches=caches)


def reuse_trace(seed: int, n_lines: int, n: int = 1500) -> Trace:
    """Loads of 1..2 lines from a pool of `n_lines` lines, the recent ones chosen more often
    (a line comes back after a few other lines of its set, or after many)."""
    rng = np.random.default_rng(seed)
    tr = Trace()
    tr.define_case(1, {"add": 1}, pops=1)
    pool = rng.permutation(n_lines) - n_lines // 3       # also lines below address 0
    for _ in range(n):
        k = min(int(rng.zipf(1.3)) - 1, n_lines - 1)
        line = int(pool[k])
        pool[1:k + 1] = pool[:k].copy()                 # the pool in recency order too
        pool[0] = line
        nb = int(rng.integers(1, 2 * LINE))
        tr.load(line * LINE + int(rng.integers(0, LINE // 2)), nb)
        tr.push(nb)
        tr.token(1)
    return tr


COMPILED = [c for n in (1, 2, 3) for c in itertools.product((4, 8, 16), repeat=n)]


@pytest.mark.parametrize("ways", COMPILED + [(4, 8, 16, 4), (2, 8), (32,), (16, 4, 12)])
@pytest.mark.parametrize("seed", range(3))
def test_ring_sets_equal_reference(ways, seed):
    sets, cap = [], 0
    for w in ways:   # each level holds at least twice the lines of the one before
        s = 2 ** (1 + seed % 2)
        while w * s < 2 * cap:
            s *= 2
        sets.append(s)
        cap = w * s
    sets = tuple(sets)
    target = with_caches(ways, sets)
    capacity = sum(w * s for w, s in zip(ways, sets, strict=True))
    tr = reuse_trace(seed + 31 * len(ways) + sum(ways), int(1.5 * capacity) + 8)
    ref = simulate(target, tr)
    for i in range(len(ways)):
        assert 0.0 < ref.cache_hit_rate[f"C{i}"] < 1.0   # each level hits and misses
    assert simulate_fast(target, tr) == ref


@pytest.mark.parametrize("seed", range(8))
def test_shipped_levels_with_reuse_equal_reference(seed):
    """The shipped target's levels (the lookup compiled into the replay loop), scaled down so
    the pool of lines hits in each of them."""
    target = with_caches((4, 8, 16), (8, 16, 32))
    tr = reuse_trace(100 + seed, 900 + 50 * seed, n=2500)
    ref = simulate(target, tr)
    assert all(0.0 < ref.cache_hit_rate[f"C{i}"] < 1.0 for i in range(3))
    assert simulate_fast(target, tr) == ref
