"""The C++ timing core's cache sets against the Python reference: set-associative LRU levels of
every associativity (1 to 32 ways, the ones with a compiled fast path and the others), set
counts that are not powers of two, lines that collide in a few sets (hits, evictions, the
recency order), negative line numbers, and tags too wide for the compact form (huge and very
negative addresses, arriving after the sets are already full) — hit rates and every other field
of the report equal."""

import dataclasses as dc

import numpy as np
import pytest

from ember_xla.emulator.timing import simulate
from ember_xla.emulator.timing_cc import simulate_fast
from ember_xla.emulator.trace import Trace
from ember_xla.machines.config import load_target

TMU = load_target("tmu")


def with_caches(ways: tuple[int, ...], sets: tuple[int, ...]):
    line = TMU.caches[0].line_bytes
    caches = tuple(dc.replace(TMU.caches[i % len(TMU.caches)], name=f"C{i}",
                              size_bytes=s * w * line, associativity=w,
                              latency_cycles=4 * (i + 1), shared=i == len(ways) - 1)
                   for i, (w, s) in enumerate(zip(ways, sets, strict=True)))
    return dc.replace(TMU, caches=caches)


def colliding_trace(seed: int, n: int, wide_after: int | None) -> Trace:
    """Loads of 1..3 lines from a pool of lines that share few sets; from load ``wide_after``
    on, also lines whose tags need 64 bits (far above and below address 0)."""
    rng = np.random.default_rng(seed)
    tr = Trace()
    tr.define_case(1, {"add": 1}, pops=1)
    line = TMU.caches[0].line_bytes
    near = rng.integers(-200, 200, 40) * 7 * line          # few sets, many tags
    far = np.array([1 << 61, -(1 << 61), (1 << 52) + 3 * line, -(1 << 50) - line],
                   dtype=np.int64)
    for i in range(n):
        pool = near if wide_after is None or i < wide_after or rng.random() < 0.7 else far
        addr = int(rng.choice(pool)) + int(rng.integers(0, line))
        nb = int(rng.integers(1, 3 * line))
        tr.load(addr, nb)
        tr.push(nb)
        tr.token(1)
    return tr


@pytest.mark.parametrize("ways,sets", [
    ((4, 8, 16), (4, 8, 16)),          # the compiled set sizes, powers of two
    ((1, 2, 3), (5, 3, 7)),            # other ways, sets not powers of two
    ((12, 20, 32), (2, 3, 1)),         # more ways than the vector path, one set
    ((16, 4, 8), (6, 1, 12)),
])
@pytest.mark.parametrize("wide_after", [None, 0, 300])
def test_cache_sets_equal_reference(ways, sets, wide_after):
    target = with_caches(ways, sets)
    tr = colliding_trace(sum(ways) + sum(sets) + (wide_after or 0), 900, wide_after)
    ref = simulate(target, tr)
    assert 0.0 < ref.cache_hit_rate["C0"] < 1.0   # the trace hits and misses
    assert simulate_fast(target, tr) == ref
