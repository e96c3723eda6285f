"""The NPU emulator: every lookup strategy pools each bag in index order, so its outputs are
bit-identical to a plain sequential numpy embedding bag and to XLA:CPU's segment_sum (empty
bags, duplicate ids); the scratchpad limit is enforced; malformed bags are refused; a lone
one-lookup piece takes the cycles computed by hand from the target; staging dedups rows."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ember_xla.emulator.npu.run import ScratchpadOverflow, Work, emulate
from ember_xla.emulator.npu.workload import Table, bags
from ember_xla.machines.config import load_target
from ember_xla.machines.npu import STRATEGIES, machine_of

M = machine_of(load_target("npu"))


def case(seed=0, rows=50, dim=24, n_bags=40):
    rng = np.random.default_rng(seed)
    lens = rng.integers(0, 7, n_bags)
    lens[[0, 5, -1]] = 0                                    # empty bags, first and last too
    ids = rng.zipf(1.3, int(lens.sum())) % rows             # skewed: many duplicates
    t = Table("t", rows, dim, rng.standard_normal((rows, dim)).astype(np.float32))
    return t, bags(ids, np.concatenate([[0], np.cumsum(lens)]))


def sequential(t, b):
    out = np.zeros((b.n_bags, t.dim), np.float32)
    for i in range(b.n_bags):
        for j in b.ids[b.offsets[i]:b.offsets[i + 1]]:
            out[i] += t.weights[j]
    return out


def xla(t, b):
    seg = np.repeat(np.arange(b.n_bags), b.lengths())
    f = jax.jit(lambda w, i, s: jax.ops.segment_sum(jnp.take(w, i, axis=0), s,
                                                   num_segments=b.n_bags))
    return np.asarray(f(t.weights, b.ids.astype(np.int32), seg.astype(np.int32)))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_pools_in_index_order(strategy):
    t, b = case()
    hot = {0: np.arange(10)} if strategy.startswith("l1") else {}
    split = [[Work(0, 0, 13, strategy)], [Work(0, 13, 40, strategy)]]
    outs, rep = emulate(M, [t], [b], split, [hot, hot])
    ref = sequential(t, b)
    assert np.array_equal(outs[0], ref)
    assert np.array_equal(outs[0], xla(t, b))
    assert rep.cores[0].lookups + rep.cores[1].lookups == len(b.ids)
    assert rep.makespan_cycles == max(c.cycles for c in rep.cores) > 0


def test_scratchpad_capacity_is_enforced():
    t, b = case(rows=5000, dim=128)
    fits = M.l1_bytes // t.row_bytes
    emulate(M, [t], [b], [[Work(0, 0, 40, "l1_ub")]], [{0: np.arange(fits)}], functional=False)
    with pytest.raises(ScratchpadOverflow, match=r"core 0: L1-resident rows need \d+ bytes; "
                       r"the scratchpad holds 524288"):
        emulate(M, [t], [b], [[Work(0, 0, 40, "l1_ub")]], [{0: np.arange(fits + 1)}])


def test_bad_bags_and_programs_are_refused():
    t, b = case()
    bad = bags(np.array([1, 50]), np.array([0, 2]))
    with pytest.raises(ValueError, match=r"table t: index 50 out of range \[0, 50\)"):
        emulate(M, [t], [bad], [[Work(0, 0, 1, "gm")]], [{}])
    with pytest.raises(ValueError, match="bag 39 is pooled 0 times"):
        emulate(M, [t], [b], [[Work(0, 0, 39, "gm")]], [{}])
    with pytest.raises(ValueError, match="strategy 'fast'"):
        emulate(M, [t], [b], [[Work(0, 0, 40, "fast")]], [{}])


def test_one_lookup_gm_piece_by_hand():
    """setup, index staging (latency + 1 transfer), zero the accumulator, fetch the row
    (latency + transfer), add, store, write the row back (latency + transfer)."""
    t = Table("t", 8, 128)
    b = bags(np.array([3]), np.array([0, 1]))
    _, rep = emulate(M, [t], [b], [[Work(0, 0, 1, "gm")]], [{}], functional=False)
    lat, xfer = M.latency, 512 / M.core_bpc
    staged = M.setup + M.xfer(12) / M.core_bpc + lat
    fetched = max(staged + 1, staged + M.index) + xfer + lat        # after the init store
    vec = fetched + 2 * M.op_add + 2 * M.op_store                  # add + store (2 chunks)
    assert rep.makespan_cycles == pytest.approx(vec + xfer + lat)
    assert rep.cores[0].gm_read_bytes == 32 + 512 and rep.cores[0].gm_write_bytes == 512


def test_staging_fetches_each_distinct_row_of_a_chunk_once():
    t = Table("t", 100, 128)
    ids = np.array([7] * 60 + [8] * 60)
    b = bags(ids, np.array([0, 60, 120]))
    _, rep = emulate(M, [t], [b], [[Work(0, 0, 2, "gm_ub")]], [{}], functional=False)
    assert rep.cores[0].unique_rows == 2
    _, rep_gm = emulate(M, [t], [b], [[Work(0, 0, 2, "gm")]], [{}], functional=False)
    assert rep_gm.cores[0].gm_read_bytes == 512 + 120 * 512     # index block + every row
    assert rep.makespan_cycles < rep_gm.makespan_cycles / 5
