"""Timing-model sanity tests that cannot pass by accident: each compares two runs that differ
in one target parameter, or a run with the bound the parameters imply."""

import dataclasses as dc

import numpy as np
import pytest

from ember_xla.dae.errors import ProgramDoesNotFit
from ember_xla.emulator.synthetic import embedding_bag_trace
from ember_xla.emulator.timing import simulate
from ember_xla.emulator.trace import Trace
from ember_xla.machines.config import load_target

TMU = load_target("tmu")


def variant(t=TMU, **kw):
    acc = {k: kw.pop(k) for k in list(kw) if k in ("data_queue_bytes", "outstanding_requests")}
    dram = {k: kw.pop(k) for k in list(kw) if k in ("latency_ns", "bandwidth_gb_per_s")}
    assert not kw
    return dc.replace(t, access=dc.replace(t.access, **acc), dram=dc.replace(t.dram, **dram))


def bags(rows, dim, batch=64, pooling=20, seed=0, **kw):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, rows, batch * pooling)
    return embedding_bag_trace(rows, dim, ids, np.arange(0, batch * pooling + 1, pooling), **kw)


def test_single_load_is_hand_computable():
    tr = Trace()
    tr.define_case(7, {"add": 3}, pops=1)
    tr.load(0, 64)
    tr.push(64)
    tr.token(7)
    r = simulate(TMU, tr)
    miss = 64 / TMU.dram_bytes_per_cycle + TMU.dram_latency_cycles
    cost = TMU.execute.callback_dispatch_cycles + 3 * TMU.execute.op_cycles["add"]
    assert r.cycles == pytest.approx(miss + cost)
    assert r.dram_bytes == 64 and r.tokens == 1 and r.entries == 1


def test_latency_hurts_with_a_tiny_queue_and_is_hidden_by_a_large_one():
    tr = bags(1_000_000, 64)          # rows far larger than the caches: every row misses
    row = 64 * 4
    tiny = row // TMU.access.lanes  # per lane: the queue holds exactly one row
    slow = {lat: simulate(variant(data_queue_bytes=tiny, latency_ns=lat), tr).cycles
            for lat in (80.0, 160.0)}
    fast = {lat: simulate(variant(data_queue_bytes=2048, latency_ns=lat), tr).cycles
            for lat in (80.0, 160.0)}
    assert slow[160.0] > 1.8 * slow[80.0]
    assert fast[160.0] < 1.05 * fast[80.0]
    assert fast[80.0] < slow[80.0] / 3


def test_tables_in_cache_run_near_the_execute_bound():
    r = simulate(TMU, bags(64, 64))    # 64 rows x 256 B = 16 KiB: fits the L1
    assert r.bound == "execute"
    assert r.cycles <= 1.2 * r.execute_busy
    assert r.cache_hit_rate["L1D"] > 0.9


def test_bandwidth_bound_case_is_bytes_over_bandwidth():
    tr = bags(1_000_000, 512, vl=512)  # 2 KiB rows, one cheap callback each
    t = variant(outstanding_requests=512, data_queue_bytes=1 << 16)
    r = simulate(t, tr)
    ideal = r.dram_bytes / t.dram_bytes_per_cycle
    assert r.bound == "dram bandwidth"
    assert ideal <= r.cycles <= 1.1 * ideal


def test_outstanding_requests_help_until_bandwidth_binds():
    tr = bags(1_000_000, 512, vl=512)
    cycles = {}
    for n in (16, 32, 64, 256, 512):
        t = variant(outstanding_requests=n, data_queue_bytes=1 << 16)
        cycles[n] = simulate(t, tr).cycles
    assert cycles[16] > 1.9 * cycles[32] > 1.9 * 1.9 * cycles[64]   # Little's law regime
    # 256 requests x 64 B / latency exceeds the bandwidth: more requests change nothing
    assert 256 * 64 / TMU.dram_latency_cycles > TMU.dram_bytes_per_cycle
    assert cycles[512] == pytest.approx(cycles[256], rel=0.01)


def test_entry_larger_than_the_queue_is_refused_with_a_reason():
    tr = bags(100, 64, batch=1, pooling=1)
    with pytest.raises(ProgramDoesNotFit, match="does not fit the 8-byte data queue"):
        simulate(variant(data_queue_bytes=1), tr)
