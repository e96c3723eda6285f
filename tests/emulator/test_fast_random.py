"""Larger cross-check of the C++ timing core against the Python reference: random traces with
several layers, dependent loads spanning cache lines, negative and huge addresses, entries of
several loads, callbacks popping several entries, tiny queues (back-pressure), small control
queues and refusals — reports equal field for field, or both refuse."""

import dataclasses as dc

import numpy as np
import pytest

from ember_xla.dae.errors import ProgramDoesNotFit
from ember_xla.emulator.synthetic import embedding_bag_trace
from ember_xla.emulator.timing import simulate
from ember_xla.emulator.timing_cc import TraceArrays, simulate_fast
from ember_xla.emulator.trace import Trace
from ember_xla.machines.config import load_target

TMU, TINY = load_target("tmu"), load_target("tiny")


def random_trace(seed: int, n_groups: int = 300) -> Trace:
    rng = np.random.default_rng(seed)
    tr = Trace()
    case_pops = (0, 1, 2, 1)
    for cid, pops in enumerate(case_pops):
        tr.define_case(cid, {"add": int(rng.integers(0, 4)), "scalar": 1}, pops=pops)
    n_layers = int(rng.integers(1, 4))
    last_load = -1
    unclaimed = 0                                     # pushed entries no token pops yet
    for _ in range(n_groups):
        for _ in range(int(rng.integers(0, 3))):      # address-only loads (index streams)
            last_load = tr.load(int(rng.integers(-4096, 1 << 20)), int(rng.integers(0, 9)),
                                queued=False, layer=int(rng.integers(0, n_layers)))
        n_bytes = 0
        for _ in range(int(rng.integers(0, 3))):      # the loads of one data-queue entry
            dep = last_load if last_load >= 0 and rng.random() < 0.7 else -1
            nb = int(rng.integers(1, 60))
            addr = int(rng.choice([rng.integers(0, 1 << 16), rng.integers(0, 1 << 40)]))
            tr.load(addr, nb, dep=dep, layer=int(rng.integers(0, n_layers)) + 1)
            n_bytes += nb
        if n_bytes or rng.random() < 0.2:
            tr.push(n_bytes or int(rng.choice([0, 8])))   # also entries without loads
            unclaimed += 1
        if rng.random() < 0.8 or unclaimed > 2:
            # pop what is there (as compiled programs do); rarely more than was pushed
            cid = (2 if unclaimed >= 2 else int(rng.choice([1, 3])) if unclaimed else 0)
            if rng.random() < 0.3:
                cid = 0
            elif rng.random() < 0.005:
                cid = 2
            tr.token(cid)
            unclaimed -= case_pops[cid]
    return tr


def variant(t, **kw):
    return dc.replace(t, access=dc.replace(t.access, **kw))


TARGETS = {
    "tmu": TMU,
    "tiny": TINY,
    "tmu-small-queue": variant(TMU, data_queue_bytes=64, control_queue_entries=2,
                               outstanding_requests=3),
    "tiny-big-queue": variant(TINY, data_queue_bytes=4096),
}


def same(target, tr):
    try:
        ref = simulate(target, tr)
    except ProgramDoesNotFit:
        with pytest.raises(ProgramDoesNotFit):
            simulate_fast(target, tr)
        return None
    fast = simulate_fast(target, tr)
    assert fast == ref
    return ref


@pytest.mark.parametrize("name", list(TARGETS))
@pytest.mark.parametrize("seed", range(12))
def test_random_traces_equal_reference(name, seed):
    same(TARGETS[name], random_trace(seed))


def test_some_random_traces_run_and_some_refuse():
    """The random cases above are not all refusals (nor all runs)."""
    outcomes = [same(TARGETS[n], random_trace(s)) is None for n in TARGETS for s in range(12)]
    assert 0 < sum(outcomes) < len(outcomes) * 0.8


@pytest.mark.parametrize("queue", [32, 64, 2048])
def test_many_bags_with_back_pressure(queue):
    """2048 bags x 8 rows (16k lookups), the queue holding 1, 2 or 64 rows."""
    rng = np.random.default_rng(queue)
    ids = rng.integers(0, 1_000_000, 2048 * 8)
    tr = embedding_bag_trace(1_000_000, 64, ids, np.arange(0, 2048 * 8 + 1, 8))
    t = variant(TMU, data_queue_bytes=queue)
    ref = same(t, tr)
    assert ref is not None and ref.tokens == 2048 * 9
    assert simulate_fast(t, TraceArrays.from_trace(tr)) == ref


def test_back_pressure_survives_an_interleaved_layer():
    """A queue of one row serialises the row fetches (each waits for the previous row to be
    consumed), even while the index layer keeps issuing in between: at least one DRAM latency
    per lookup."""
    rng = np.random.default_rng(1)
    n = 2048
    ids = rng.integers(0, 1_000_000, n)
    tr = embedding_bag_trace(1_000_000, 64, ids, np.arange(0, n + 1, 4))
    t = variant(TMU, data_queue_bytes=256 // TMU.access.lanes)
    r = same(t, tr)
    assert r.cycles >= n * t.dram_latency_cycles
    assert r.queue_full_stall > 0.8 * r.cycles


def test_entries_without_loads_are_pushed_in_order():
    """A pushed value the access unit computes (no load: e.g. an induction variable) takes
    queue space and is pushed in order; it used to block every later entry (deadlock)."""
    tr = Trace()
    tr.define_case(0, {"add": 1}, pops=2)
    for j in range(200):
        tr.push(8)                       # the loop index
        tr.load(j * 4096, 64)
        tr.push(64)                      # the row
        tr.token(0)
    for name in ("tmu", "tmu-small-queue"):
        r = same(TARGETS[name], tr)
        assert r is not None and r.entries == 400 and r.tokens == 200


def hit_trace(seed: int, n: int = 400) -> Trace:
    """Loads of three layers from a small pool of lines (hits at every level, few DRAM lines)
    where each layer's loads wait for another layer's: the issue times of one level's hits
    go back and forth between layers."""
    rng = np.random.default_rng(seed)
    tr = Trace()
    tr.define_case(0, {"add": int(rng.integers(1, 5))}, pops=1)
    pool = rng.integers(0, 1 << 22, 24) * 64
    last = [-1, -1, -1]
    for _ in range(n):
        lay = int(rng.integers(0, 3))
        dep = last[(lay + 1) % 3] if rng.random() < 0.6 else -1
        last[lay] = tr.load(int(rng.choice(pool)) + int(rng.integers(0, 64)),
                            int(rng.integers(1, 200)), dep=dep, layer=lay)
        tr.push(int(rng.integers(1, 64)))
        tr.token(0)
    return tr


@pytest.mark.parametrize("outstanding", [1, 2, 3, 5, 128])
@pytest.mark.parametrize("seed", range(4))
def test_hits_out_of_issue_order(outstanding, seed):
    """Completions of one cache level that arrive earlier than ones already in flight (an
    issue time going back), with the outstanding requests binding: the in-flight set of the
    C++ core is the reference's heap."""
    same(variant(TMU, outstanding_requests=outstanding), hit_trace(seed))


@pytest.mark.parametrize("seed", range(6))
def test_layer_numbers_of_any_size(seed):
    """Layer numbers past the small ones the core finds directly (negative, large, mixed with
    small ones) give the reference's report."""
    tr = random_trace(seed)
    names = {0: -5, 1: 17, 2: 1 << 40, 3: 3}
    tr.layer = [names[v] if k == 0 else v for k, v in zip(tr.kind, tr.layer, strict=True)]
    same(TMU, tr)
    same(TARGETS["tmu-small-queue"], tr)


def test_a_load_waits_for_the_last_load_of_another_layer():
    """A load that depends on another layer's last load waits for it, whatever an earlier
    replay left in the core's per-event memory (where a load's completion replaces its link to
    its layer's next load; a layer's last load has none): a trace whose loads complete early,
    then one whose dependency, a wide load, completes late."""
    early = Trace()
    early.define_case(0, {"add": 1}, pops=0)
    for k in range(40):
        early.load(64 * k, 4, queued=False, layer=0)
    early.token(0)
    late = Trace()
    late.define_case(0, {"add": 1}, pops=1)
    for k in range(8):
        last = late.load((1 << 24) + 4096 * k, 4096, queued=False, layer=0)
    late.load(64, 64, dep=last, layer=1)
    late.push(64)
    late.token(0)
    for _ in range(3):
        assert same(TMU, early) is not None
        ref = same(TMU, late)
        assert ref is not None and ref.cycles > TMU.dram_latency_cycles
